// The collaboration API is written in the shared types (Actor, PageRequest, ...): whoever uses it gets them.
@_exported import Tenancy
