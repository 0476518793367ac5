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

typedef int (*rbac_curl_progress_callback)(void *context, curl_off_t, curl_off_t, curl_off_t, curl_off_t);

/* Asks `callback` at each step of a transfer whether to go on (non-zero ends it): libcurl asks while it connects,
   moves data, and says goodbye to a server (SMTP's QUIT), so an ended transfer waits for no answer. */
static inline CURLcode rbac_curl_set_progress(CURL *curl, rbac_curl_progress_callback callback, void *context) {
    CURLcode code = curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, callback);
    if (code == CURLE_OK) code = curl_easy_setopt(curl, CURLOPT_XFERINFODATA, context);
    return code == CURLE_OK ? curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L) : code;
}

/* How the one transfer a multi handle ran ended: curl_multi_info_read hands back a struct with a union, which Swift
   reads clumsily. CURLE_FAILED_INIT when the handle reports no ended transfer. */
static inline CURLcode rbac_curl_multi_outcome(CURLM *multi) {
    int left = 0;
    CURLMsg *message;
    while ((message = curl_multi_info_read(multi, &left)) != NULL) {
        if (message->msg == CURLMSG_DONE) return message->data.result;
    }
    return CURLE_FAILED_INIT;
}

#endif
