#ifndef RBAC_COPENSSL_SHIM_H
#define RBAC_COPENSSL_SHIM_H

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ecdsa.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/param_build.h>
#include <openssl/rand.h>

/* EVP_MAX_MD_SIZE is a plain macro; keep one typed constant for Swift. */
static const int rbac_SHA256_DIGEST_LENGTH = 32;

/* Public keys from a JWK's fields, built with OpenSSL 3's EVP_PKEY_fromdata. Each returns NULL when OpenSSL
   refuses the key (a point not on the curve, say). Written in C because OSSL_PARAM_BLD and the big numbers are
   easier to free correctly here than across the Swift boundary. */

static inline EVP_PKEY *rbac_public_key_from_params(const char *type, OSSL_PARAM_BLD *builder) {
    EVP_PKEY *key = NULL;
    OSSL_PARAM *params = OSSL_PARAM_BLD_to_param(builder);
    EVP_PKEY_CTX *context = EVP_PKEY_CTX_new_from_name(NULL, type, NULL);
    if (params == NULL || context == NULL || EVP_PKEY_fromdata_init(context) != 1
        || EVP_PKEY_fromdata(context, &key, EVP_PKEY_PUBLIC_KEY, params) != 1) {
        key = NULL;
    }
    EVP_PKEY_CTX_free(context);
    OSSL_PARAM_free(params);
    if (key != NULL) {
        /* fromdata takes the fields as given; the public check is what refuses a point off the curve. */
        EVP_PKEY_CTX *check = EVP_PKEY_CTX_new_from_pkey(NULL, key, NULL);
        int ok = check != NULL && EVP_PKEY_public_check(check) == 1;
        EVP_PKEY_CTX_free(check);
        if (!ok) {
            EVP_PKEY_free(key);
            key = NULL;
        }
    }
    ERR_clear_error();
    return key;
}

static inline EVP_PKEY *rbac_rsa_public_key(const unsigned char *n, size_t n_length, const unsigned char *e,
                                            size_t e_length) {
    BIGNUM *modulus = BN_bin2bn(n, (int)n_length, NULL);
    BIGNUM *exponent = BN_bin2bn(e, (int)e_length, NULL);
    OSSL_PARAM_BLD *builder = OSSL_PARAM_BLD_new();
    EVP_PKEY *key = NULL;
    if (modulus != NULL && exponent != NULL && builder != NULL
        && OSSL_PARAM_BLD_push_BN(builder, OSSL_PKEY_PARAM_RSA_N, modulus) == 1
        && OSSL_PARAM_BLD_push_BN(builder, OSSL_PKEY_PARAM_RSA_E, exponent) == 1) {
        key = rbac_public_key_from_params("RSA", builder);
    }
    OSSL_PARAM_BLD_free(builder);
    BN_free(modulus);
    BN_free(exponent);
    return key;
}

/* point: the uncompressed encoding 0x04 || x || y. */
static inline EVP_PKEY *rbac_p256_public_key(const unsigned char *point, size_t length) {
    OSSL_PARAM_BLD *builder = OSSL_PARAM_BLD_new();
    EVP_PKEY *key = NULL;
    if (builder != NULL
        && OSSL_PARAM_BLD_push_utf8_string(builder, OSSL_PKEY_PARAM_GROUP_NAME, "P-256", 0) == 1
        && OSSL_PARAM_BLD_push_octet_string(builder, OSSL_PKEY_PARAM_PUB_KEY, point, length) == 1) {
        key = rbac_public_key_from_params("EC", builder);
    }
    OSSL_PARAM_BLD_free(builder);
    return key;
}

static inline EVP_PKEY *rbac_ed25519_public_key(const unsigned char *raw, size_t length) {
    EVP_PKEY *key = EVP_PKEY_new_raw_public_key_ex(NULL, "ED25519", NULL, raw, length);
    ERR_clear_error();
    return key;
}

/* A JWS ES256 signature is r || s, 32 bytes each; OpenSSL verifies the DER encoding. Returns the DER length
   written to der (at most 72 bytes), or 0. */
static inline int rbac_ecdsa_p256_der(const unsigned char *raw, unsigned char *der, size_t capacity) {
    ECDSA_SIG *signature = ECDSA_SIG_new();
    BIGNUM *r = BN_bin2bn(raw, 32, NULL);
    BIGNUM *s = BN_bin2bn(raw + 32, 32, NULL);
    int length = 0;
    if (signature != NULL && r != NULL && s != NULL && ECDSA_SIG_set0(signature, r, s) == 1) {
        r = NULL;
        s = NULL; /* owned by the signature now */
        if ((size_t)i2d_ECDSA_SIG(signature, NULL) <= capacity) {
            unsigned char *out = der;
            length = i2d_ECDSA_SIG(signature, &out);
        }
    }
    BN_free(r);
    BN_free(s);
    ECDSA_SIG_free(signature);
    return length < 0 ? 0 : length;
}

/* 1 when signature verifies message under key with digest ("SHA256"; NULL for Ed25519, which hashes itself). */
static inline int rbac_verify(EVP_PKEY *key, const char *digest, const unsigned char *signature,
                              size_t signature_length, const unsigned char *message, size_t message_length) {
    EVP_MD_CTX *context = EVP_MD_CTX_new();
    int ok = context != NULL && EVP_DigestVerifyInit_ex(context, NULL, digest, NULL, NULL, key, NULL) == 1
             && EVP_DigestVerify(context, signature, signature_length, message, message_length) == 1;
    EVP_MD_CTX_free(context);
    ERR_clear_error();
    return ok;
}

/* AES-256-GCM: out = ciphertext || 16-byte tag; the 12-byte nonce is the caller's. Returns 1 on success. */
static inline int rbac_aes256gcm_seal(const unsigned char *key, const unsigned char *nonce,
                                      const unsigned char *aad, size_t aad_length,
                                      const unsigned char *plaintext, size_t length, unsigned char *out) {
    EVP_CIPHER_CTX *context = EVP_CIPHER_CTX_new();
    int written = 0, final = 0;
    int ok = context != NULL && EVP_EncryptInit_ex2(context, EVP_aes_256_gcm(), key, nonce, NULL) == 1
             && (aad_length == 0 || EVP_EncryptUpdate(context, NULL, &written, aad, (int)aad_length) == 1)
             && EVP_EncryptUpdate(context, out, &written, plaintext, (int)length) == 1
             && EVP_EncryptFinal_ex(context, out + written, &final) == 1
             && EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_GET_TAG, 16, out + length) == 1;
    EVP_CIPHER_CTX_free(context);
    ERR_clear_error();
    return ok;
}

/* The inverse: sealed = ciphertext || tag, out gets sealed_length - 16 bytes. 1 only when the tag verifies. */
static inline int rbac_aes256gcm_open(const unsigned char *key, const unsigned char *nonce,
                                      const unsigned char *aad, size_t aad_length,
                                      const unsigned char *sealed, size_t sealed_length, unsigned char *out) {
    if (sealed_length < 16) return 0;
    size_t length = sealed_length - 16;
    EVP_CIPHER_CTX *context = EVP_CIPHER_CTX_new();
    int written = 0, final = 0;
    int ok = context != NULL && EVP_DecryptInit_ex2(context, EVP_aes_256_gcm(), key, nonce, NULL) == 1
             && (aad_length == 0 || EVP_DecryptUpdate(context, NULL, &written, aad, (int)aad_length) == 1)
             && EVP_DecryptUpdate(context, out, &written, sealed, (int)length) == 1
             && EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_SET_TAG, 16, (void *)(sealed + length)) == 1
             && EVP_DecryptFinal_ex(context, out + written, &final) == 1;
    EVP_CIPHER_CTX_free(context);
    ERR_clear_error();
    return ok;
}

#endif
