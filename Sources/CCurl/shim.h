#ifndef RBAC_CCURL_SHIM_H
#define RBAC_CCURL_SHIM_H

#include <curl/curl.h>

/* curl_easy_setopt and curl_easy_getinfo are variadic, which Swift cannot call: one typed wrapper per kind of
   argument. */
static inline CURLcode rbac_curl_set_long(CURL *curl, CURLoption option, long value) {
    return curl_easy_setopt(curl, option, value);
}

static inline CURLcode rbac_curl_set_string(CURL *curl, CURLoption option, const char *value) {
    return curl_easy_setopt(curl, option, value);
}

static inline CURLcode rbac_curl_set_pointer(CURL *curl, CURLoption option, void *value) {
    return curl_easy_setopt(curl, option, value);
}

static inline CURLcode rbac_curl_set_offset(CURL *curl, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(curl, option, value);
}

typedef size_t (*rbac_curl_data_callback)(char *data, size_t size, size_t count, void *context);

static inline CURLcode rbac_curl_set_callback(CURL *curl, CURLoption option, rbac_curl_data_callback callback) {
    return curl_easy_setopt(curl, option, callback);
}

static inline CURLcode rbac_curl_response_code(CURL *curl, long *code) {
    return curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, code);
}

#endif
