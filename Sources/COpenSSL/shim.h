#ifndef RBAC_COPENSSL_SHIM_H
#define RBAC_COPENSSL_SHIM_H

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/err.h>

/* EVP_MAX_MD_SIZE is a plain macro; keep one typed constant for Swift. */
static const int rbac_SHA256_DIGEST_LENGTH = 32;

#endif
