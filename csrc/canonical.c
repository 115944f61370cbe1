/* canonical: canonical JSON (json.dumps(obj, sort_keys=True, separators=(",", ":")))
 * and SHA-256 over it (OpenSSL EVP_Digest), plus the §6.1 placement fragment id
 * built without an intermediate dict.
 *
 * Strings are read as (generalized) UTF-8: PyUnicode_AsUTF8AndSize for the common
 * case, and the "surrogatepass" UTF-8 encoding for strings holding lone surrogates
 * (only reachable with ensure_ascii=True; with ensure_ascii=False the UTF-8 encode
 * error propagates, as json.dumps(...).encode("utf-8") would raise it). Byte order of
 * such UTF-8 equals code point order, so dict keys are sorted with memcmp. */
#include "canonical.h"
#include "gctrack.h"
#include "coverage_kernels.h"
#include "layout.h"
#include "str_index.h"

#include <openssl/err.h>
#include <openssl/evp.h>
#if defined(__SSE2__)
#include <emmintrin.h> /* SSE2: part of every x86-64 */
#endif

/* ---- growable output buffer ------------------------------------------------ */

typedef struct {
    char *data;
    size_t len;
    size_t cap;
} cj_buf;

static int
cj_reserve_slow(cj_buf *b, size_t extra)
{
    size_t need;
    if (__builtin_add_overflow(b->len, extra, &need)) {
        PyErr_NoMemory();
        return -1;
    }
    if (need <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need) {
        if (cap > ((size_t)PY_SSIZE_T_MAX) / 2) {
            cap = need;
            break;
        }
        cap *= 2;
    }
    if (cap > (size_t)PY_SSIZE_T_MAX) {
        PyErr_NoMemory();
        return -1;
    }
    char *p = PyMem_Realloc(b->data, cap);
    if (p == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->data = p;
    b->cap = cap;
    return 0;
}

/* Room for extra more bytes (len <= cap always holds: the common case is one compare). */
static inline int
cj_reserve(cj_buf *b, size_t extra)
{
    if (b->cap - b->len >= extra) return 0;
    return cj_reserve_slow(b, extra);
}

static inline int
cj_write(cj_buf *b, const char *s, size_t n)
{
    if (n == 0) return 0; /* b->data may still be NULL: no memcpy to it */
    if (cj_reserve(b, n) < 0) return -1;
    memcpy(b->data + b->len, s, n);
    b->len += n;
    return 0;
}

static inline int
cj_putc(cj_buf *b, char c)
{
    if (b->len == b->cap && cj_reserve(b, 1) < 0) return -1;
    b->data[b->len++] = c;
    return 0;
}

static void
cj_free(cj_buf *b)
{
    PyMem_Free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

/* ---- strings ------------------------------------------------------------------ */

static const char cj_hex[] = "0123456789abcdef";

/* Append "\\uXXXX" (lowercase hex) for a BMP code unit; p must have 6 bytes. */
static void
cj_u_escape(char *p, unsigned int unit)
{
    p[0] = '\\';
    p[1] = 'u';
    p[2] = cj_hex[(unit >> 12) & 0xF];
    p[3] = cj_hex[(unit >> 8) & 0xF];
    p[4] = cj_hex[(unit >> 4) & 0xF];
    p[5] = cj_hex[unit & 0xF];
}

/* Escape of an ASCII byte as json does it, or NULL when the byte is copied as is. */
static const char *
cj_ascii_escape(unsigned char c)
{
    switch (c) {
    case '"': return "\\\"";
    case '\\': return "\\\\";
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    case '\b': return "\\b";
    case '\f': return "\\f";
    default: return NULL;
    }
}

/* Whether all eight bytes of w are copied as is in both modes: 0x20 <= byte < 0x7F, not
 * '"' or '\\' (exact for the whole word: a borrow can only follow a byte that is flagged). */
static inline int
cj_word_plain(uint64_t w)
{
    const uint64_t ones = 0x0101010101010101ULL, high = 0x8080808080808080ULL;
    uint64_t control = (w - 0x20 * ones) & ~w;
    uint64_t quote = w ^ (0x22 * ones), backslash = w ^ (0x5C * ones), del = w ^ (0x7F * ones);
    quote = (quote - ones) & ~quote;
    backslash = (backslash - ones) & ~backslash;
    del = (del - ones) & ~del;
    return ((control | quote | backslash | del | w) & high) == 0;
}

/* Kernel: write the JSON string literal of generalized UTF-8 bytes s[0:n].
 * ensure_ascii: non-ASCII as \uXXXX (surrogate pairs above U+FFFF); else raw bytes.
 * Returns 0, or -1 with MemoryError set. Input is trusted well-formed (it comes from
 * CPython's own encoder). */
static int
cj_write_utf8_string(cj_buf *b, const unsigned char *s, size_t n, int ensure_ascii)
{
    /* Worst case 6 output bytes per input byte for ASCII controls, 12 per 4-byte
     * sequence (3 per byte) otherwise: reserve 6n + 2 once. */
    size_t worst;
    if (__builtin_mul_overflow(n, (size_t)6, &worst) || __builtin_add_overflow(worst, (size_t)2, &worst)) {
        PyErr_NoMemory();
        return -1;
    }
    if (cj_reserve(b, worst) < 0) return -1;
    char *out = b->data + b->len;
    *out++ = '"';
    size_t i = 0;
    while (i < n) {
#if defined(__SSE2__)
        /* sixteen plain bytes at a time: no byte below 0x20 or from 0x80 on (signed, below
         * 0x20), none '"', '\\' or DEL; the same bytes as cj_word_plain accepts */
        while (i + 16 <= n) {
            __m128i x = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
            __m128i bad = _mm_or_si128(_mm_cmplt_epi8(x, _mm_set1_epi8(0x20)),
                                       _mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('"')),
                                                    _mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('\\')),
                                                                 _mm_cmpeq_epi8(x, _mm_set1_epi8(0x7F)))));
            if (_mm_movemask_epi8(bad) != 0) break;
            _mm_storeu_si128((__m128i *)(void *)out, x);
            out += 16;
            i += 16;
        }
#endif
        /* eight plain bytes at a time (printable ASCII other than '"', '\\' and DEL) */
        while (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (!cj_word_plain(w)) break;
            memcpy(out, s + i, 8);
            out += 8;
            i += 8;
        }
        if (i >= n) break;
        if (i + 8 > n && n >= 8) {
            /* the last fewer than eight bytes: when the word ending the string is plain, so is
             * every byte of it, and each of its bytes before i was copied as is (a plain byte
             * is, by either loop): its copy ends the output so far, written again with the tail */
            uint64_t w;
            memcpy(&w, s + n - 8, 8);
            if (cj_word_plain(w)) {
                size_t back = i - (n - 8); /* < 8: bytes of the word already written */
                memcpy(out - back, s + n - 8, 8);
                out += 8 - back;
                i = n;
                break;
            }
        }
        unsigned char c = s[i];
        if (c < 0x80) {
            const char *esc;
            if (c >= 0x20 && c != '"' && c != '\\' && !(c == 0x7F && ensure_ascii)) {
                *out++ = (char)c;
            }
            else if ((esc = cj_ascii_escape(c)) != NULL) {
                out[0] = esc[0];
                out[1] = esc[1];
                out += 2;
            }
            else {
                cj_u_escape(out, c);
                out += 6;
            }
            i++;
            continue;
        }
        size_t len = (c >= 0xF0) ? 4 : (c >= 0xE0) ? 3 : 2;
        if (i + len > n) len = n - i; /* defensive; cannot happen for CPython output */
        if (!ensure_ascii) {
            memcpy(out, s + i, len);
            out += len;
            i += len;
            continue;
        }
        unsigned int cp;
        if (len == 2) cp = ((unsigned int)(c & 0x1F) << 6) | (s[i + 1] & 0x3Fu);
        else if (len == 3)
            cp = ((unsigned int)(c & 0x0F) << 12) | ((s[i + 1] & 0x3Fu) << 6) | (s[i + 2] & 0x3Fu);
        else if (len == 4)
            cp = ((unsigned int)(c & 0x07) << 18) | ((s[i + 1] & 0x3Fu) << 12) |
                 ((s[i + 2] & 0x3Fu) << 6) | (s[i + 3] & 0x3Fu);
        else cp = 0xFFFD;
        i += len;
        if (cp >= 0x10000) {
            unsigned int v = cp - 0x10000;
            cj_u_escape(out, 0xD800 | (v >> 10));
            cj_u_escape(out + 6, 0xDC00 | (v & 0x3FF));
            out += 12;
        }
        else {
            cj_u_escape(out, cp);
            out += 6;
        }
    }
    *out++ = '"';
    b->len = (size_t)(out - b->data);
    return 0;
}

/* UTF-8 view of a str: either borrowed from the str's cache (holder NULL) or owned by
 * a bytes object (holder set, surrogatepass). */
typedef struct {
    const char *s;
    Py_ssize_t n;
    PyObject *holder;
} cj_utf8;

static int
cj_get_utf8(PyObject *str, int ensure_ascii, cj_utf8 *v)
{
    v->holder = NULL;
    v->s = PyUnicode_AsUTF8AndSize(str, &v->n);
    if (v->s != NULL) return 0;
    if (!ensure_ascii || !PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) return -1;
    PyErr_Clear();
    v->holder = PyUnicode_AsEncodedString(str, "utf-8", "surrogatepass");
    if (v->holder == NULL) return -1;
    char *p;
    if (PyBytes_AsStringAndSize(v->holder, &p, &v->n) < 0) {
        Py_CLEAR(v->holder);
        return -1;
    }
    v->s = p;
    return 0;
}

static int
cj_write_str(cj_buf *b, PyObject *str, int ensure_ascii)
{
    cj_utf8 v;
    if (cj_get_utf8(str, ensure_ascii, &v) < 0) return -1;
    int rc = cj_write_utf8_string(b, (const unsigned char *)v.s, (size_t)v.n, ensure_ascii);
    Py_XDECREF(v.holder);
    return rc;
}

/* ---- ints --------------------------------------------------------------------- */

/* "00".."99": two digits per division */
static const char cj_digit_pairs[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

static int
cj_write_i64(cj_buf *b, long long v)
{
    char tmp[24];
    char *end = tmp + sizeof(tmp);
    char *p = end;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    while (u >= 100) {
        unsigned pair = (unsigned)(u % 100);
        u /= 100;
        p -= 2;
        p[0] = cj_digit_pairs[2 * pair];
        p[1] = cj_digit_pairs[2 * pair + 1];
    }
    if (u >= 10) {
        p -= 2;
        p[0] = cj_digit_pairs[2 * u];
        p[1] = cj_digit_pairs[2 * u + 1];
    }
    else *--p = (char)('0' + u);
    if (v < 0) *--p = '-';
    size_t n = (size_t)(end - p);
    if (cj_reserve(b, n) < 0) return -1;
    memcpy(b->data + b->len, p, n);
    b->len += n;
    return 0;
}

/* Any int (or int subclass, not bool) in decimal, like int.__repr__. */
static int
cj_write_int(cj_buf *b, PyObject *obj)
{
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (!overflow) return cj_write_i64(b, v);
    PyObject *text = PyNumber_ToBase(obj, 10);
    if (text == NULL) return -1;
    Py_ssize_t n;
    const char *s = PyUnicode_AsUTF8AndSize(text, &n);
    int rc = (s == NULL) ? -1 : cj_write(b, s, (size_t)n);
    Py_DECREF(text);
    return rc;
}

/* Raise TypeError(fmt % type(obj).__name__); fmt has one %U. */
static void
cj_type_error(const char *fmt, PyObject *obj)
{
    PyObject *tp = PyObject_Type(obj);
    if (tp == NULL) return;
    PyObject *name = PyObject_GetAttrString(tp, "__name__");
    Py_DECREF(tp);
    if (name == NULL) return;
    PyErr_Format(PyExc_TypeError, fmt, name);
    Py_DECREF(name);
}

/* ---- containers ------------------------------------------------------------ */

typedef struct {
    const char *s;
    size_t n;
    PyObject *holder; /* owned bytes for surrogatepass keys, else NULL */
    PyObject *key;    /* strong */
    PyObject *value;  /* strong */
} cj_item;

static int
cj_item_cmp(const void *pa, const void *pb)
{
    const cj_item *a = pa, *b = pb;
    size_t m = a->n < b->n ? a->n : b->n;
    int c = m ? memcmp(a->s, b->s, m) : 0;
    if (c != 0) return c;
    return (a->n > b->n) - (a->n < b->n);
}

static int cj_encode(cj_buf *b, PyObject *obj, int ensure_ascii);

static int
cj_encode_dict(cj_buf *b, PyObject *dict, int ensure_ascii)
{
    Py_ssize_t size = PyDict_Size(dict);
    if (size < 0) return -1;
    if (size == 0) return cj_write(b, "{}", 2);
    cj_item *items = mr_alloc_array((size_t)size, sizeof(cj_item));
    if (items == NULL) return -1;
    Py_ssize_t count = 0, pos = 0;
    PyObject *key, *value;
    int rc = -1;
    while (PyDict_Next(dict, &pos, &key, &value)) {
        if (count >= size) {
            PyErr_SetString(PyExc_RuntimeError, "dictionary changed size during canonical encoding");
            goto done;
        }
        if (!PyUnicode_Check(key)) {
            cj_type_error("canonical JSON keys must be str, not %U", key);
            goto done;
        }
        cj_item *it = &items[count];
        cj_utf8 v;
        if (cj_get_utf8(key, ensure_ascii, &v) < 0) goto done;
        it->s = v.s;
        it->n = (size_t)v.n;
        it->holder = v.holder;
        Py_INCREF(key);
        it->key = key;
        Py_INCREF(value);
        it->value = value;
        count++;
    }
    if (count != size) {
        PyErr_SetString(PyExc_RuntimeError, "dictionary changed size during canonical encoding");
        goto done;
    }
    qsort(items, (size_t)count, sizeof(cj_item), cj_item_cmp);
    if (cj_putc(b, '{') < 0) goto done;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (i && cj_putc(b, ',') < 0) goto done;
        if (cj_write_utf8_string(b, (const unsigned char *)items[i].s, items[i].n, ensure_ascii) < 0) goto done;
        if (cj_putc(b, ':') < 0) goto done;
        if (cj_encode(b, items[i].value, ensure_ascii) < 0) goto done;
    }
    if (cj_putc(b, '}') < 0) goto done;
    rc = 0;
done:
    for (Py_ssize_t i = 0; i < count; i++) {
        Py_XDECREF(items[i].holder);
        Py_DECREF(items[i].key);
        Py_DECREF(items[i].value);
    }
    PyMem_Free(items);
    return rc;
}

/* Item i of the list or tuple seq (is_list says which) as a new reference in *item: 1; 0 when i
 * is past the end; -1 with an exception. The size is read again on every call: a list can change
 * while Python code runs between two items. */
static int
cj_seq_item(PyObject *seq, int is_list, Py_ssize_t i, PyObject **item)
{
    *item = NULL;
    Py_ssize_t n = is_list ? PyList_Size(seq) : PyTuple_Size(seq);
    if (n < 0) return -1;
    if (i >= n) return 0;
    PyObject *got = is_list ? PyList_GetItem(seq, i) : PyTuple_GetItem(seq, i);
    if (got == NULL) return -1;
    Py_INCREF(got);
    *item = got;
    return 1;
}

static int
cj_encode_seq(cj_buf *b, PyObject *seq, int is_list, int ensure_ascii)
{
    if (cj_putc(b, '[') < 0) return -1;
    for (Py_ssize_t i = 0;; i++) {
        PyObject *item;
        int more = cj_seq_item(seq, is_list, i, &item);
        if (more < 0) return -1;
        if (more == 0) break;
        int rc = (i ? cj_putc(b, ',') : 0);
        if (rc == 0) rc = cj_encode(b, item, ensure_ascii);
        Py_DECREF(item);
        if (rc < 0) return -1;
    }
    return cj_putc(b, ']');
}

static int
cj_encode(cj_buf *b, PyObject *obj, int ensure_ascii)
{
    if (PyUnicode_Check(obj)) return cj_write_str(b, obj, ensure_ascii);
    if (obj == Py_None) return cj_write(b, "null", 4);
    if (obj == Py_True) return cj_write(b, "true", 4);
    if (obj == Py_False) return cj_write(b, "false", 5);
    if (PyLong_Check(obj)) return cj_write_int(b, obj);
    int is_list = PyList_Check(obj);
    if (is_list || PyTuple_Check(obj) || PyDict_Check(obj)) {
        if (Py_EnterRecursiveCall(" while encoding canonical JSON")) return -1;
        int rc = PyDict_Check(obj) ? cj_encode_dict(b, obj, ensure_ascii)
                                   : cj_encode_seq(b, obj, is_list, ensure_ascii);
        Py_LeaveRecursiveCall();
        return rc;
    }
    cj_type_error("Object of type %U is not canonical-JSON serializable", obj);
    return -1;
}

/* ---- SHA-256 ------------------------------------------------------------------ */

/* SHA-256's implementation, fetched from the default provider once (Init_Canonical). With
 * OpenSSL 3, passing EVP_sha256() makes every EVP_Digest / EVP_DigestInit_ex fetch it again:
 * about 180 ns of the 580 a placement fragment id's 210-byte digest took (measured with a C loop
 * against OpenSSL 3.0.19). NULL (before OpenSSL 3, or a failed fetch): EVP_sha256() is used. */
static EVP_MD *cj_sha256_fetched = NULL;

static const EVP_MD *
cj_sha256_md(void)
{
    return cj_sha256_fetched != NULL ? cj_sha256_fetched : EVP_sha256();
}

/* Kernel: lowercase hex SHA-256 of data[0:n] into hex[0:64]. Returns 0 or -1. */
static int
sha256_hex_kernel(const void *data, size_t n, char hex[64])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    if (EVP_Digest(data, n, md, &mdlen, cj_sha256_md(), NULL) != 1 || mdlen != 32) return -1;
    for (unsigned int i = 0; i < 32; i++) {
        hex[2 * i] = cj_hex[md[i] >> 4];
        hex[2 * i + 1] = cj_hex[md[i] & 0xF];
    }
    return 0;
}

/* Return str(prefix + hex sha256(data)). */
static PyObject *
sha256_text(const char *prefix, const void *data, size_t n)
{
    char out[7 + 64];
    size_t plen = strlen(prefix);
    if (plen > 7) {
        PyErr_SetString(PyExc_SystemError, "sha256 prefix too long");
        return NULL;
    }
    memcpy(out, prefix, plen);
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = sha256_hex_kernel(data, n, out + plen);
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        PyErr_SetString(PyExc_RuntimeError, "OpenSSL SHA-256 digest failed");
        return NULL;
    }
    return PyUnicode_DecodeASCII(out, (Py_ssize_t)(plen + 64), NULL);
}

/* ---- Python glue ------------------------------------------------------------ */

static int
parse_obj_ensure_ascii(PyObject *args, PyObject *kwargs, const char *fmt, PyObject **obj, int *ensure_ascii)
{
    static char *kwlist[] = {"obj", "ensure_ascii", NULL};
    *ensure_ascii = 1;
    return PyArg_ParseTupleAndKeywords(args, kwargs, fmt, kwlist, obj, ensure_ascii) ? 0 : -1;
}

static PyObject *
py_sha256_hex(PyObject *Py_UNUSED(module), PyObject *data)
{
    char *p;
    Py_ssize_t n;
    if (!PyBytes_Check(data)) {
        PyErr_SetString(PyExc_TypeError, "sha256_hex() argument must be bytes");
        return NULL;
    }
    if (PyBytes_AsStringAndSize(data, &p, &n) < 0) return NULL;
    return sha256_text("", p, (size_t)n);
}

static PyObject *
py_canonical_json(PyObject *Py_UNUSED(module), PyObject *args, PyObject *kwargs)
{
    PyObject *obj;
    int ensure_ascii;
    if (parse_obj_ensure_ascii(args, kwargs, "O|p:canonical_json", &obj, &ensure_ascii) < 0) return NULL;
    cj_buf b = {NULL, 0, 0};
    PyObject *result = NULL;
    if (cj_encode(&b, obj, ensure_ascii) == 0) {
        result = ensure_ascii ? PyUnicode_DecodeASCII(b.data ? b.data : "", (Py_ssize_t)b.len, NULL)
                              : PyUnicode_DecodeUTF8(b.data ? b.data : "", (Py_ssize_t)b.len, NULL);
    }
    cj_free(&b);
    return result;
}

static PyObject *
py_canonical_sha256(PyObject *Py_UNUSED(module), PyObject *args, PyObject *kwargs)
{
    PyObject *obj;
    int ensure_ascii;
    if (parse_obj_ensure_ascii(args, kwargs, "O|p:canonical_sha256", &obj, &ensure_ascii) < 0) return NULL;
    cj_buf b = {NULL, 0, 0};
    PyObject *result = NULL;
    if (cj_encode(&b, obj, ensure_ascii) == 0) result = sha256_text("", b.data ? b.data : "", b.len);
    cj_free(&b);
    return result;
}

/* Strict int check for placement_fragment_id arguments (bool rejected). */
static int
pfid_check_int(PyObject *v, const char *name)
{
    if (!PyLong_Check(v) || PyBool_Check(v)) {
        PyErr_Format(PyExc_TypeError, "%s must be an integer", name);
        return -1;
    }
    return 0;
}

static int
pfid_write_int_tuple(cj_buf *b, PyObject *t, const char *name)
{
    if (!PyTuple_Check(t)) {
        PyErr_Format(PyExc_TypeError, "%s must be a tuple of integers", name);
        return -1;
    }
    Py_ssize_t n = PyTuple_Size(t);
    if (n < 0 || cj_putc(b, '[') < 0) return -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyTuple_GetItem(t, i);
        if (item == NULL || pfid_check_int(item, name) < 0) return -1;
        if (i && cj_putc(b, ',') < 0) return -1;
        if (cj_write_int(b, item) < 0) return -1;
    }
    return cj_putc(b, ']');
}

static int
pfid_write_key(cj_buf *b, const char *key)
{
    /* ',"key":' — callers emit the leading '{' themselves for the first key. */
    size_t n = strlen(key);
    if (cj_reserve(b, n + 3) < 0) return -1;
    b->data[b->len++] = '"';
    memcpy(b->data + b->len, key, n);
    b->len += n;
    b->data[b->len++] = '"';
    b->data[b->len++] = ':';
    return 0;
}

static int
pfid_write_aliases(cj_buf *b, PyObject *aliases)
{
    if (!PyTuple_Check(aliases)) {
        PyErr_SetString(PyExc_TypeError, "aliases must be a tuple of str");
        return -1;
    }
    Py_ssize_t n = PyTuple_Size(aliases);
    if (n < 0) return -1;
    if (n == 0) return cj_write(b, "[]", 2);
    cj_item *items = mr_alloc_array((size_t)n, sizeof(cj_item));
    if (items == NULL) return -1;
    Py_ssize_t count = 0;
    int rc = -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *a = PyTuple_GetItem(aliases, i);
        if (a == NULL) goto done;
        if (!PyUnicode_Check(a)) {
            PyErr_SetString(PyExc_TypeError, "aliases must be a tuple of str");
            goto done;
        }
        cj_utf8 v;
        if (cj_get_utf8(a, 1, &v) < 0) goto done;
        items[count].s = v.s;
        items[count].n = (size_t)v.n;
        items[count].holder = v.holder;
        Py_INCREF(a);
        items[count].key = a;
        items[count].value = NULL;
        count++;
    }
    qsort(items, (size_t)count, sizeof(cj_item), cj_item_cmp);
    if (cj_putc(b, '[') < 0) goto done;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (i && cj_putc(b, ',') < 0) goto done;
        if (cj_write_utf8_string(b, (const unsigned char *)items[i].s, items[i].n, 1) < 0) goto done;
    }
    if (cj_putc(b, ']') < 0) goto done;
    rc = 0;
done:
    for (Py_ssize_t i = 0; i < count; i++) {
        Py_XDECREF(items[i].holder);
        Py_DECREF(items[i].key);
    }
    PyMem_Free(items);
    return rc;
}

static PyObject *
py_placement_fragment_id(PyObject *Py_UNUSED(module), PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"tensor_id", "global_offset", "local_shape", "nbytes", "dp", "tp",
                             "pp", "ep", "aliases", "pipeline_stage_id", NULL};
    PyObject *tensor_id, *offset, *shape, *nbytes, *dp, *tp, *pp, *ep, *aliases, *stage;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOOOOOOO:placement_fragment_id", kwlist, &tensor_id,
                                     &offset, &shape, &nbytes, &dp, &tp, &pp, &ep, &aliases, &stage))
        return NULL;
    if (!PyUnicode_Check(tensor_id)) {
        PyErr_SetString(PyExc_TypeError, "tensor_id must be a str");
        return NULL;
    }
    if (pfid_check_int(nbytes, "nbytes") < 0 || pfid_check_int(dp, "dp") < 0 || pfid_check_int(tp, "tp") < 0 ||
        pfid_check_int(pp, "pp") < 0 || pfid_check_int(ep, "ep") < 0)
        return NULL;
    if (stage != Py_None && pfid_check_int(stage, "pipeline_stage_id") < 0) return NULL;

    cj_buf b = {NULL, 0, 0};
    PyObject *result = NULL;
    /* Keys in sorted order: aliases, global_offset, local_shape, nbytes,
     * [pipeline_stage_id], rank{dp,ep,pp,tp}, schema, tensor_id. */
    if (cj_putc(&b, '{') < 0 || pfid_write_key(&b, "aliases") < 0 || pfid_write_aliases(&b, aliases) < 0) goto done;
    if (cj_putc(&b, ',') < 0 || pfid_write_key(&b, "global_offset") < 0 ||
        pfid_write_int_tuple(&b, offset, "global_offset") < 0)
        goto done;
    if (cj_putc(&b, ',') < 0 || pfid_write_key(&b, "local_shape") < 0 ||
        pfid_write_int_tuple(&b, shape, "local_shape") < 0)
        goto done;
    if (cj_putc(&b, ',') < 0 || pfid_write_key(&b, "nbytes") < 0 || cj_write_int(&b, nbytes) < 0) goto done;
    if (stage != Py_None) {
        if (cj_putc(&b, ',') < 0 || pfid_write_key(&b, "pipeline_stage_id") < 0 || cj_write_int(&b, stage) < 0)
            goto done;
    }
    if (cj_write(&b, ",\"rank\":{\"dp\":", 14) < 0 || cj_write_int(&b, dp) < 0) goto done;
    if (cj_write(&b, ",\"ep\":", 6) < 0 || cj_write_int(&b, ep) < 0) goto done;
    if (cj_write(&b, ",\"pp\":", 6) < 0 || cj_write_int(&b, pp) < 0) goto done;
    if (cj_write(&b, ",\"tp\":", 6) < 0 || cj_write_int(&b, tp) < 0) goto done;
    {
        static const char schema[] = "},\"schema\":\"weight-placement-fragment\",\"tensor_id\":";
        if (cj_write(&b, schema, sizeof(schema) - 1) < 0) goto done;
    }
    if (cj_write_str(&b, tensor_id, 1) < 0 || cj_putc(&b, '}') < 0) goto done;
    result = sha256_text("sha256:", b.data, b.len);
done:
    cj_free(&b);
    return result;
}

/* ---- placement fragment lists (manifest placement_id / wire JSON) -------------- */

enum { PFL_ALIASES, PFL_OFFSET, PFL_SHAPE, PFL_NBYTES, PFL_STAGE, PFL_ID, PFL_RANK, PFL_TENSOR,
       PFL_DP, PFL_EP, PFL_PP, PFL_TP, PFL_DICT, PFL_NKEYS };
static const char *const pfl_names[PFL_NKEYS] = {
    "aliases", "global_offset", "local_shape", "nbytes", "pipeline_stage_id", "placement_fragment_id",
    "rank", "tensor_id", "dp", "ep", "pp", "tp", "__dict__"};

static int
pfl_key_value(cj_buf *b, int first, const char *key, PyObject *value)
{
    if (!first && cj_putc(b, ',') < 0) return -1;
    if (pfid_write_key(b, key) < 0) return -1;
    return cj_encode(b, value, 1);
}

/* Per-call state of a fragment-list encoding: the interned state keys, and the canonical
 * JSON of every rank object met so far (a placement's fragments share a few rank objects,
 * so each is read and encoded once per call, as weight/_canonical.py's rank_cache does).
 * A slot holds a strong reference to its rank object, so no address is reused while the
 * call runs. */
typedef struct {
    PyObject *rank; /* strong; NULL marks an empty slot */
    size_t off;     /* its JSON: ranks.data[off : off + len] */
    size_t len;
} pfl_slot;

typedef struct {
    PyObject *keys[PFL_NKEYS];
    pfl_slot *slots; /* open addressing, linear probing */
    size_t cap;      /* 0 or a power of two */
    size_t used;
    cj_buf ranks;
    /* the batched encoding's exact fragment and rank classes (borrowed from the caller's
     * arguments; NULL elsewhere): a fragment's state is read with PyObject_GenericGetDict (what
     * its __dict__ attribute returns) and a rank of any other class declines, so no read of the
     * batched path runs Python code */
    PyObject *fragment_type;
    PyObject *rank_type;
    /* field read at state entry i of the previous fragment (a guess for the next one's order) */
    signed char guess[PFL_TENSOR + 1];
    /* the text of the exact int tuples (offsets, shapes) met last at each slot (pfl_int_tuple) */
    struct pfl_tslot *tmemo; /* PFL_TMEMO slots, or NULL (no memo) */
} pfl_ctx;

/* A placement's fragments share a few offset and shape tuple objects (one per tensor shape, as
 * a rule): the canonical text of an exact tuple of exact ints is remembered by the tuple's
 * address, in a small direct-mapped table. Such a tuple and its items cannot change, and the
 * slot holds a strong reference (no address is reused while the call runs), so the text
 * remembered is the text the tuple encodes to, at any later point of the call. One more slot
 * (tmemo[PFL_TMEMO]) keeps the text of the last exact str tensor id: consecutive fragments
 * mostly share their tensor id object, and a str cannot change either. */
#define PFL_TMEMO 16
#define PFL_TMEMO_TEXT 118
struct pfl_tslot {
    PyObject *t; /* strong; NULL: empty */
    unsigned short len;
    char text[PFL_TMEMO_TEXT];
};

static int
pfl_keys(PyObject **keys)
{
    for (int k = 0; k < PFL_NKEYS; k++) {
        keys[k] = PyUnicode_InternFromString(pfl_names[k]);
        if (keys[k] == NULL) {
            while (k-- > 0) Py_DECREF(keys[k]);
            return -1;
        }
    }
    return 0;
}

static int
pfl_ctx_init(pfl_ctx *c)
{
    c->slots = NULL;
    c->cap = c->used = 0;
    c->ranks.data = NULL;
    c->ranks.len = c->ranks.cap = 0;
    c->fragment_type = NULL;
    c->rank_type = NULL;
    for (int k = 0; k <= PFL_TENSOR; k++) c->guess[k] = (signed char)k;
    c->tmemo = PyMem_Calloc(PFL_TMEMO + 1, sizeof(struct pfl_tslot)); /* NULL: no memo (not an error) */
    if (pfl_keys(c->keys) < 0) {
        PyMem_Free(c->tmemo);
        c->tmemo = NULL;
        return -1;
    }
    return 0;
}

static void
pfl_ctx_free(pfl_ctx *c)
{
    for (size_t i = 0; i < c->cap; i++) Py_XDECREF(c->slots[i].rank);
    PyMem_Free(c->slots);
    c->slots = NULL;
    c->cap = c->used = 0;
    cj_free(&c->ranks);
    if (c->tmemo != NULL)
        for (int k = 0; k <= PFL_TMEMO; k++) Py_XDECREF(c->tmemo[k].t); /* exact int tuples, an exact str: no Python code */
    PyMem_Free(c->tmemo);
    c->tmemo = NULL;
    for (int k = 0; k < PFL_NKEYS; k++) Py_DECREF(c->keys[k]);
}

static size_t
pfl_slot_of(const pfl_ctx *c, const PyObject *rank)
{
    uint64_t x = (uint64_t)(uintptr_t)rank;
    x ^= x >> 33;
    x *= 0xFF51AFD7ED558CCDULL;
    x ^= x >> 33;
    size_t mask = c->cap - 1, i = (size_t)x & mask;
    while (c->slots[i].rank != NULL && c->slots[i].rank != rank) i = (i + 1) & mask;
    return i;
}

/* Make room for one more slot (load factor <= 1/2). */
static int
pfl_ctx_reserve(pfl_ctx *c)
{
    if (c->cap != 0 && (c->used + 1) * 2 <= c->cap) return 0;
    size_t cap = c->cap ? c->cap : 32;
    while ((c->used + 1) * 2 > cap) {
        if (cap > ((size_t)PY_SSIZE_T_MAX) / (2 * sizeof(pfl_slot))) {
            PyErr_NoMemory();
            return -1;
        }
        cap *= 2;
    }
    pfl_slot *old = c->slots;
    size_t old_cap = c->cap;
    c->slots = mr_alloc_array(cap, sizeof(pfl_slot));
    if (c->slots == NULL) {
        c->slots = old;
        return -1;
    }
    for (size_t i = 0; i < cap; i++) c->slots[i].rank = NULL;
    c->cap = cap;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].rank != NULL) c->slots[pfl_slot_of(c, old[i].rank)] = old[i];
    PyMem_Free(old);
    return 0;
}

static int cj_scan_names(PyObject *state, PyObject *const *names, int n, PyObject **v);

/* Append the canonical JSON of topology.rank_object(rank), encoded once per rank object. */
static int
pfl_rank(cj_buf *b, pfl_ctx *c, PyObject *rank)
{
    if (c->cap != 0) {
        const pfl_slot *hit = &c->slots[pfl_slot_of(c, rank)];
        if (hit->rank == rank) return cj_write(b, c->ranks.data + hit->off, hit->len);
    }
    if (pfl_ctx_reserve(c) < 0) return -1;
    PyObject *rank_state, *r[4] = {NULL, NULL, NULL, NULL};
    int rc = 0;
    if (c->rank_type != NULL) {
        /* the batched encoding: an exact rank's state dict read by one scan (no Python code);
         * anything else declines (-1, no exception) */
        if ((PyObject *)Py_TYPE(rank) != c->rank_type) return -1;
        rank_state = PyObject_GenericGetDict(rank, NULL);
        if (rank_state == NULL) return -1;
        if (!PyDict_Check(rank_state) || cj_scan_names(rank_state, c->keys + PFL_DP, 4, r) < 0) rc = -1;
        for (int k = 0; k < 4 && rc == 0; k++) {
            if (r[k] == NULL) rc = -1;
        }
        if (rc < 0) {
            Py_DECREF(rank_state);
            return -1;
        }
        for (int k = 0; k < 4; k++) Py_INCREF(r[k]);
    }
    else {
        rank_state = mr_pf_state_dict(rank, c->keys[PFL_DICT]);
        if (rank_state == NULL) return -1;
        for (int k = 0; k < 4 && rc == 0; k++) {
            r[k] = mr_dict_item(rank_state, c->keys[PFL_DP + k]);
            if (r[k] == NULL) rc = -1;
            else Py_INCREF(r[k]);
        }
    }
    size_t off = c->ranks.len;
    if (rc == 0) rc = cj_putc(&c->ranks, '{');
    for (int k = 0; k < 4 && rc == 0; k++) rc = pfl_key_value(&c->ranks, k == 0, pfl_names[PFL_DP + k], r[k]);
    if (rc == 0) rc = cj_putc(&c->ranks, '}');
    for (int k = 0; k < 4; k++) Py_XDECREF(r[k]);
    Py_DECREF(rank_state);
    if (rc < 0) {
        c->ranks.len = off;
        return -1;
    }
    /* the lookups above may have run Python code: find the slot again */
    pfl_slot *slot = &c->slots[pfl_slot_of(c, rank)];
    if (slot->rank == NULL) {
        Py_INCREF(rank);
        slot->rank = rank;
        slot->off = off;
        slot->len = c->ranks.len - off;
        c->used++;
    }
    return cj_write(b, c->ranks.data + off, c->ranks.len - off);
}

/* A tuple of exact ints (offsets, shapes) without the generic dispatch; else cj_encode. With a
 * ctx (c not NULL, its memo allocated), an exact tuple of exact ints is encoded once per slot
 * (pfl_tslot): the text is copied from the memo on a hit. */
static int
pfl_int_tuple_memo(cj_buf *b, PyObject *value, pfl_ctx *c)
{
    if (!PyTuple_CheckExact(value)) return cj_encode(b, value, 1);
    struct pfl_tslot *slot = NULL;
    if (c != NULL && c->tmemo != NULL) {
        uintptr_t a = (uintptr_t)value;
        slot = &c->tmemo[((a >> 4) ^ (a >> 10)) & (PFL_TMEMO - 1)];
        if (slot->t == value) return cj_write(b, slot->text, slot->len);
    }
    size_t start = b->len;
    int exact = 1;
    Py_ssize_t n = PyTuple_Size(value);
    if (n < 0 || cj_putc(b, '[') < 0) return -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyTuple_GetItem(value, i);
        if (item == NULL) return -1;
        if (i && cj_putc(b, ',') < 0) return -1;
        if (!PyLong_CheckExact(item)) exact = 0;
        if ((PyLong_CheckExact(item) ? cj_write_int(b, item) : cj_encode(b, item, 1)) < 0) return -1;
    }
    if (cj_putc(b, ']') < 0) return -1;
    if (slot != NULL && exact && b->len - start <= PFL_TMEMO_TEXT) {
        PyObject *old = slot->t;
        slot->t = Py_NewRef(value);
        slot->len = (unsigned short)(b->len - start);
        memcpy(slot->text, b->data + start, b->len - start);
        Py_XDECREF(old); /* an exact tuple of exact ints: its release runs no Python code */
    }
    return 0;
}

/* cj_encode of a fragment's tensor id, the text of an exact str remembered in the ctx's last
 * slot (see pfl_tslot). */
static int
pfl_tensor_id(cj_buf *b, PyObject *value, pfl_ctx *c)
{
    if (!PyUnicode_CheckExact(value) || c->tmemo == NULL) return cj_encode(b, value, 1);
    struct pfl_tslot *slot = &c->tmemo[PFL_TMEMO];
    if (slot->t == value) return cj_write(b, slot->text, slot->len);
    size_t start = b->len;
    if (cj_write_str(b, value, 1) < 0) return -1;
    if (b->len - start <= PFL_TMEMO_TEXT) {
        PyObject *old = slot->t;
        slot->t = Py_NewRef(value);
        slot->len = (unsigned short)(b->len - start);
        memcpy(slot->text, b->data + start, b->len - start);
        Py_XDECREF(old); /* an exact str: its release runs no Python code */
    }
    return 0;
}

static int
pfl_int_tuple(cj_buf *b, PyObject *value)
{
    return pfl_int_tuple_memo(b, value, NULL);
}

/* Borrowed state[name] for every fragment field (v[PFL_ALIASES .. PFL_TENSOR]) from one scan of
 * the state's entries, matching the interned names by identity: no hashing, no Python code.
 * Exact when every key met is an exact str (no two keys of the dict are then equal, so
 * state[name] is the entry whose key is name, or one equal to it); a slot is left NULL for a
 * name not met by identity. Returns 0, or -1 (nothing set, no exception) when some key is not
 * an exact str: the caller then looks every field up. */
static int
pfl_scan_fields(PyObject *state, pfl_ctx *c, PyObject **v)
{
    for (int k = 0; k <= PFL_TENSOR; k++) v[k] = NULL;
    Py_ssize_t pos = 0, entry = 0;
    PyObject *key, *value;
    while (PyDict_Next(state, &pos, &key, &value)) {
        int k = -1;
        if (entry <= PFL_TENSOR && key == c->keys[(int)c->guess[entry]]) k = c->guess[entry];
        else {
            for (int j = 0; j <= PFL_TENSOR; j++) {
                if (key == c->keys[j]) {
                    k = j;
                    break;
                }
            }
            if (k < 0 && !PyUnicode_CheckExact(key)) return -1;
            if (k >= 0 && entry <= PFL_TENSOR) c->guess[entry] = (signed char)k;
        }
        if (k >= 0) v[k] = value;
        entry++;
    }
    return 0;
}

/* An int field: exact ints without the generic dispatch. */
static inline int
pfl_int(cj_buf *b, PyObject *value)
{
    return PyLong_CheckExact(value) ? cj_write_int(b, value) : cj_encode(b, value, 1);
}

/* The canonical JSON of weight/_canonical.py fragment_object(fragment) from its fields v
 * (PFL_ALIASES .. PFL_TENSOR). */
static int
pfl_write_fields(cj_buf *b, PyObject *const *v, pfl_ctx *c)
{
    int rc;
    PyObject *aliases = v[PFL_ALIASES];
    if (PyTuple_CheckExact(aliases) && PyTuple_Size(aliases) == 0) rc = cj_write(b, "{\"aliases\":[]", 13);
    else if ((rc = cj_write(b, "{\"aliases\":", 11)) == 0) rc = cj_encode(b, aliases, 1);
    if (rc == 0) rc = cj_write(b, ",\"global_offset\":", 17);
    if (rc == 0) rc = pfl_int_tuple_memo(b, v[PFL_OFFSET], c);
    if (rc == 0) rc = cj_write(b, ",\"local_shape\":", 15);
    if (rc == 0) rc = pfl_int_tuple_memo(b, v[PFL_SHAPE], c);
    if (rc == 0) rc = cj_write(b, ",\"nbytes\":", 10);
    if (rc == 0) rc = pfl_int(b, v[PFL_NBYTES]);
    if (rc == 0 && v[PFL_STAGE] != Py_None) {
        rc = cj_write(b, ",\"pipeline_stage_id\":", 21);
        if (rc == 0) rc = pfl_int(b, v[PFL_STAGE]);
    }
    if (rc == 0) rc = cj_write(b, ",\"placement_fragment_id\":", 25);
    if (rc == 0) rc = cj_encode(b, v[PFL_ID], 1);
    if (rc == 0) rc = cj_write(b, ",\"rank\":", 8);
    if (rc == 0) rc = pfl_rank(b, c, v[PFL_RANK]);
    if (rc == 0) rc = cj_write(b, ",\"tensor_id\":", 13);
    if (rc == 0) rc = pfl_tensor_id(b, v[PFL_TENSOR], c);
    if (rc == 0) rc = cj_putc(b, '}');
    return rc;
}

/* One fragment: the canonical JSON of weight/_canonical.py fragment_object(fragment). */
static int
pfl_fragment(cj_buf *b, PyObject *fragment, pfl_ctx *c)
{
    PyObject *state = mr_pf_state_dict(fragment, c->keys[PFL_DICT]);
    if (state == NULL) return -1;
    int rc = 0;
    PyObject *v[PFL_TENSOR + 1];
    int got = 0;
    if (pfl_scan_fields(state, c, v) < 0) {
        for (int k = 0; k <= PFL_TENSOR; k++) v[k] = NULL;
    }
    /* the fields not met by the scan looked up in order (the first missing one raises);
     * no Python code has run since the scan: its borrowed values are still the dict's */
    for (; got <= PFL_TENSOR; got++) {
        if (v[got] == NULL && (v[got] = mr_dict_item(state, c->keys[got])) == NULL) {
            rc = -1;
            break;
        }
        Py_INCREF(v[got]);
    }
    if (rc == 0) rc = pfl_write_fields(b, v, c);
    for (int k = 0; k < got; k++) Py_DECREF(v[k]);
    Py_DECREF(state);
    return rc;
}

/* Append canonical JSON of a fragment list (list or tuple) to b. */
static int
pfl_fragments(cj_buf *b, PyObject *fragments, pfl_ctx *c)
{
    if (!PyList_Check(fragments) && !PyTuple_Check(fragments)) {
        PyErr_SetString(PyExc_TypeError, "fragments must be a list or tuple");
        return -1;
    }
    int is_list = PyList_Check(fragments);
    if (cj_putc(b, '[') < 0) return -1;
    for (Py_ssize_t i = 0;; i++) {
        PyObject *item;
        int more = cj_seq_item(fragments, is_list, i, &item);
        if (more < 0) return -1;
        if (more == 0) break;
        int rc = i ? cj_putc(b, ',') : 0;
        if (rc == 0) rc = pfl_fragment(b, item, c);
        Py_DECREF(item);
        if (rc < 0) return -1;
    }
    return cj_putc(b, ']');
}

static PyObject *
py_canonical_fragments_json(PyObject *Py_UNUSED(module), PyObject *fragments)
{
    pfl_ctx c;
    if (pfl_ctx_init(&c) < 0) return NULL;
    cj_buf b = {NULL, 0, 0};
    PyObject *result = NULL;
    if (pfl_fragments(&b, fragments, &c) == 0) result = PyUnicode_DecodeASCII(b.data, (Py_ssize_t)b.len, NULL);
    cj_free(&b);
    pfl_ctx_free(&c);
    return result;
}

/* "[" + ",".join('{"fragments":' + canonical_fragments_json(f) + "," + tail[1:]) + "]" over
 * pairs (f, tail); each tail is an ASCII str holding a JSON object "{...}" with at least one
 * key (the rest of the part object, keys sorting after "fragments"). */
/* ASCII bytes of an ASCII str (borrowed from its UTF-8 cache), or NULL with ValueError/TypeError. */
static const char *
pfl_ascii(PyObject *str, Py_ssize_t *n, const char *name)
{
    if (!PyUnicode_Check(str)) {
        PyErr_Format(PyExc_TypeError, "%s must be a str", name);
        return NULL;
    }
    const char *s = PyUnicode_AsUTF8AndSize(str, n);
    if (s == NULL) return NULL;
    for (Py_ssize_t k = 0; k < *n; k++) {
        if ((unsigned char)s[k] >= 0x80) {
            PyErr_Format(PyExc_ValueError, "%s must be ASCII", name);
            return NULL;
        }
    }
    return s;
}

/* ---- parts in list order ---------------------------------------------------------- *
 * Every path reads the fragments (and their ranks) in list order, the order the reference's
 * part_object reads them: a value whose reads run Python code (a subclass with a
 * __getattribute__ or a __dict__ property) sees the same sequence of reads. The batched path
 * (exact fragment and rank classes given) reads a batch's objects ahead of encoding them, which
 * runs no Python code and so cannot be observed; it declines (no exception, nothing observable
 * run) on anything else, and the in-order encoding then reads every value the reference's way.
 * (An earlier fast path encoded in memory-address order; a hostile subclass could see that.) */

typedef struct {
    cj_buf out;
    EVP_MD_CTX *md; /* sha256 mode: out is flushed into it */
} pfl_sink;

static int
pfl_sink_write(pfl_sink *s, const char *p, size_t n)
{
    if (cj_write(&s->out, p, n) < 0) return -1;
    if (s->md != NULL && s->out.len >= ((size_t)1 << 20)) {
        if (EVP_DigestUpdate(s->md, s->out.data, s->out.len) != 1) {
            PyErr_SetString(PyExc_RuntimeError, "OpenSSL SHA-256 digest failed");
            return -1;
        }
        s->out.len = 0;
    }
    return 0;
}

/* The result of the fast path: hex SHA-256 or the text. */
static PyObject *
pfl_sink_result(pfl_sink *s)
{
    if (s->md == NULL) return PyUnicode_DecodeASCII(s->out.data ? s->out.data : "", (Py_ssize_t)s->out.len, NULL);
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    if ((s->out.len && EVP_DigestUpdate(s->md, s->out.data, s->out.len) != 1) ||
        EVP_DigestFinal_ex(s->md, md, &mdlen) != 1 || mdlen != 32) {
        PyErr_SetString(PyExc_RuntimeError, "OpenSSL SHA-256 digest failed");
        return NULL;
    }
    char hex[64];
    for (unsigned int i = 0; i < 32; i++) {
        hex[2 * i] = cj_hex[md[i] >> 4];
        hex[2 * i + 1] = cj_hex[md[i] & 0xF];
    }
    return PyUnicode_DecodeASCII(hex, 64, NULL);
}

enum { TD_T_TENSOR, TD_T_SPLIT, TD_T_REPLICATED, TD_T_OWNERSHIP, TD_TYPES };
static int td_sink_tensors(pfl_sink *s, PyObject *tensors, PyObject *const *types);

/* Prefetch the lines of an object's first len bytes (at least its header's): every line from
 * obj to obj + len - 1, the last one included. pymalloc places a 128-byte block (a 71-character
 * placement fragment id) 48 bytes into a line, so its text ends on a third line, which lines at
 * obj and obj + 64 alone do not reach (cj_write_utf8_string waited there). */
static inline void
pfl_prefetch(const PyObject *obj, size_t len)
{
    const char *p = (const char *)obj;
    __builtin_prefetch(p);
    for (size_t line = 64; line < len; line += 64) __builtin_prefetch(p + line);
    if (len > 1) __builtin_prefetch(p + len - 1);
}

enum { PFL_BATCH = 8 };

/* The state dicts of objs[0:nb] (each exactly type) into states[0:*nstates] (new references, the
 * caller releases them), each touched (its first entry read) before any is scanned, so that the
 * batch's cache misses overlap. 0, or -1 (nothing raised, or an exception of the state read) when
 * one object is not exactly type or its state is not a dict. */
static int
batch_states(PyObject *const *objs, size_t nb, PyObject *type, PyObject **states, size_t *nstates)
{
    *nstates = 0;
    for (size_t j = 0; j < nb; j++) {
        if ((PyObject *)Py_TYPE(objs[j]) != type || (states[j] = PyObject_GenericGetDict(objs[j], NULL)) == NULL)
            return -1;
        ++*nstates;
        if (!PyDict_Check(states[j])) return -1;
    }
    for (size_t j = 0; j < nb; j++) {
        Py_ssize_t pos = 0;
        PyObject *key, *value;
        (void)PyDict_Next(states[j], &pos, &key, &value);
    }
    return 0;
}

/* One batch of the fused path's fragment encoding: objs[0:nb] (held by the caller), every one
 * exactly c->fragment_type with a rank exactly c->rank_type and a state dict keyed by exact str,
 * so no read runs Python code and reading the batch ahead of encoding it cannot differ from
 * reading each fragment just before its text. Each text goes to b, preceded by ',' when commas
 * is set (and lead, for the first); starts (nb + 1 entries, or NULL) receives where each begins
 * and the end. The reads are memory-latency bound (scattered objects), so the batch takes one
 * level at a time over all its fragments, whose cache misses then overlap: the state dicts, one
 * entry of each, every field (its objects prefetched), the fields' references (the tuples' items
 * prefetched), then the texts. 0, or -1 (decline; an exception may be set). */
static int
pfl_batch(cj_buf *b, PyObject *const *objs, size_t nb, pfl_ctx *c, size_t *starts, int commas, int lead)
{
    PyObject *states[PFL_BATCH];
    PyObject *fields[PFL_BATCH][PFL_TENSOR + 1];
    size_t nstates = 0, nfields = 0; /* nfields: the fields of objs[0:nfields] are held */
    int bad = 0;
    /* an accepted C-owned layout (PlacementFragment): the fields are loaded from the objects
     * (an empty one declines, as a missing key did) and stay borrowed: the caller holds every
     * fragment, and a field slot of an exact layout object changes only through Python code,
     * which none of the encoding below runs (exact fragment and rank classes; the collector is
     * paused for the call; values of other classes are encoded by cj_encode, which runs none
     * either, but on its error path, after which no field is read). Not taking and releasing a
     * reference to each of the 8 fields spares writes to objects (offset and shape tuples, rank,
     * tensor id) the memos otherwise never touch (measured: canonical_parts_json -2..-4% at Kimi
     * 20 layers, -2% at the 10^6 sweep point) */
    static mr_class_memo memo;
    mr_layout_class lc;
    if (nb > 0 && c->fragment_type != NULL && mr_pf_layout(&memo, &lc, c->fragment_type)) {
        for (size_t j = 0; j < nb && !bad; j++) {
            PyObject *const *f = mr_layout_fields_set(objs[j], &lc);
            if (f == NULL) {
                bad = 1;
                break;
            }
            PyObject **v = fields[j];
            v[PFL_ALIASES] = f[MR_PF_ALIASES];
            v[PFL_OFFSET] = f[MR_PF_GLOBAL_OFFSET];
            v[PFL_SHAPE] = f[MR_PF_LOCAL_SHAPE];
            v[PFL_NBYTES] = f[MR_PF_NBYTES];
            v[PFL_STAGE] = f[MR_PF_PIPELINE_STAGE_ID];
            v[PFL_ID] = f[MR_PF_PLACEMENT_FRAGMENT_ID];
            v[PFL_RANK] = f[MR_PF_RANK];
            v[PFL_TENSOR] = f[MR_PF_TENSOR_ID];
            pfl_prefetch(v[PFL_ID], 128);
            pfl_prefetch(v[PFL_OFFSET], 64);
            pfl_prefetch(v[PFL_SHAPE], 64);
            pfl_prefetch(v[PFL_NBYTES], 0);
            pfl_prefetch(v[PFL_TENSOR], 80);
        }
        if (bad) return -1;
        goto encode;
    }
    bad = batch_states(objs, nb, c->fragment_type, states, &nstates) < 0;
    /* borrowed fields (no Python code runs until they are all held) */
    for (size_t j = 0; !bad && j < nb; j++) {
        PyObject **v = fields[j];
        if (pfl_scan_fields(states[j], c, v) < 0) bad = 1;
        for (int k = 0; k <= PFL_TENSOR && !bad; k++) {
            if (v[k] == NULL) bad = 1;
        }
        if (bad) break;
        pfl_prefetch(v[PFL_ID], 128);
        pfl_prefetch(v[PFL_OFFSET], 64);
        pfl_prefetch(v[PFL_SHAPE], 64);
        pfl_prefetch(v[PFL_NBYTES], 0);
        pfl_prefetch(v[PFL_TENSOR], 80);
    }
    if (!bad) nfields = nb;
    for (size_t j = 0; j < nfields; j++) {
        for (int k = 0; k <= PFL_TENSOR; k++) Py_INCREF(fields[j][k]);
        for (int k = PFL_OFFSET; k <= PFL_SHAPE; k++) {
            PyObject *t = fields[j][k];
            Py_ssize_t n = PyTuple_CheckExact(t) ? PyTuple_Size(t) : 0;
            for (Py_ssize_t i = 0; i < n; i++) pfl_prefetch(PyTuple_GetItem(t, i), 0);
        }
    }
encode:
    for (size_t j = 0; !bad && j < nb; j++) {
        if (commas && (j || lead) && cj_putc(b, ',') < 0) bad = 1;
        if (starts != NULL) starts[j] = b->len;
        if (!bad && pfl_write_fields(b, fields[j], c) < 0) bad = 1;
    }
    if (!bad && starts != NULL) starts[nb] = b->len;
    for (size_t j = 0; j < nfields; j++)
        for (int k = 0; k <= PFL_TENSOR; k++) Py_DECREF(fields[j][k]);
    for (size_t j = 0; j < nstates; j++) Py_DECREF(states[j]);
    return bad ? -1 : 0;
}

/* Tail of pair i of the fast paths' checks: its ASCII bytes, or NULL (decline, no exception)
 * when the pair is not a (fragments list or tuple, non-empty JSON object text) tuple. */
static const char *
pfl_pair_tail(PyObject *pair, Py_ssize_t *tn)
{
    if (!PyTuple_Check(pair) || PyTuple_Size(pair) != 2) return NULL;
    PyObject *frags = PyTuple_GetItem(pair, 0), *tail = PyTuple_GetItem(pair, 1);
    if (frags == NULL || tail == NULL || !PyUnicode_Check(tail) || !(PyList_Check(frags) || PyTuple_Check(frags))) {
        PyErr_Clear();
        return NULL;
    }
    const char *ts = PyUnicode_AsUTF8AndSize(tail, tn);
    if (ts == NULL) {
        PyErr_Clear();
        return NULL;
    }
    if (*tn < 3 || ts[0] != '{' || ts[1] == '}') return NULL;
    for (Py_ssize_t k = 0; k < *tn; k++)
        if ((unsigned char)ts[k] >= 0x80) return NULL;
    return ts;
}

/* The second text of the dual form (see pfl_parts_direct): prefix + parts + head + the first
 * text's hex digest + tail + the tensors + after. All ASCII. */
typedef struct {
    const char *head, *tail, *after;
    size_t hn, tn, an;
} pfl_wire;

/* Lowercase hex of the digest md finishes (64 chars into hex). 0, or -1 with an exception. */
static int
pfl_md_hex(EVP_MD_CTX *md, char hex[64])
{
    unsigned char out[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    if (EVP_DigestFinal_ex(md, out, &mdlen) != 1 || mdlen != 32) {
        PyErr_SetString(PyExc_RuntimeError, "OpenSSL SHA-256 digest failed");
        return -1;
    }
    for (unsigned int i = 0; i < 32; i++) {
        hex[2 * i] = cj_hex[out[i] >> 4];
        hex[2 * i + 1] = cj_hex[out[i] & 0xF];
    }
    return 0;
}

static int
pfl_md_update(EVP_MD_CTX *md, const char *p, size_t n)
{
    if (n && EVP_DigestUpdate(md, p, n) != 1) {
        PyErr_SetString(PyExc_RuntimeError, "OpenSSL SHA-256 digest failed");
        return -1;
    }
    return 0;
}

/* The dual form's end, the parts text written: the first text goes on with suffix, tensors and
 * after (its digest: hex1), a copy of the digest state taken after the parts with head, hex1,
 * tail, tensors and the wire's after (hex2); the tensors are encoded once, into a text both
 * digests read. (hex1, hex2), or NULL (an exception may be set: the caller declines). */
static PyObject *
pfl_dual_end(pfl_sink *sink, const char *ss, size_t sn, PyObject *tensors, PyObject *const *types, const char *fs,
             size_t fn, const pfl_wire *wire)
{
    PyObject *result = NULL;
    EVP_MD_CTX *second = NULL;
    pfl_sink text = {{NULL, 0, 0}, NULL}; /* the tensors' text (no digest: kept whole) */
    char hex1[64], hex2[64];
    if (pfl_md_update(sink->md, sink->out.data, sink->out.len) < 0) goto done;
    sink->out.len = 0;
    second = EVP_MD_CTX_new();
    if (second == NULL || EVP_MD_CTX_copy_ex(second, sink->md) != 1) {
        PyErr_SetString(PyExc_RuntimeError, "OpenSSL SHA-256 digest failed");
        goto done;
    }
    if (td_sink_tensors(&text, tensors, types) < 0) goto done;
    if (pfl_md_update(sink->md, ss, sn) < 0 || pfl_md_update(sink->md, text.out.data, text.out.len) < 0 ||
        pfl_md_update(sink->md, fs, fn) < 0 || pfl_md_hex(sink->md, hex1) < 0)
        goto done;
    if (pfl_md_update(second, wire->head, wire->hn) < 0 || pfl_md_update(second, hex1, 64) < 0 ||
        pfl_md_update(second, wire->tail, wire->tn) < 0 || pfl_md_update(second, text.out.data, text.out.len) < 0 ||
        pfl_md_update(second, wire->after, wire->an) < 0 || pfl_md_hex(second, hex2) < 0)
        goto done;
    PyObject *first = PyUnicode_DecodeASCII(hex1, 64, NULL);
    PyObject *other = first == NULL ? NULL : PyUnicode_DecodeASCII(hex2, 64, NULL);
    if (other != NULL) result = PyTuple_Pack(2, first, other);
    Py_XDECREF(first);
    Py_XDECREF(other);
done:
    if (second != NULL) EVP_MD_CTX_free(second);
    cj_free(&text.out);
    return result;
}

/* The batched path (exact fragment and rank classes given): the parts encoded in list order
 * straight into the sink (no scratch text, no copy), in batches whose reads overlap (see
 * pfl_batch); then the suffix and, with tensors (not NULL), the canonical JSON list of the
 * tensors (as canonical_tensors_json) and fs[0:fn]. Lists are read as the in-order path reads
 * them (size read again at each step, items held while used). The result, or NULL with no
 * exception: the caller declines (before any read that could run Python code: every object is
 * type-checked before it is read). With wire (tensors given, want_sha set), the dual form: the
 * pair (first hex, second hex) of pfl_dual_end, the parts encoded and hashed once for both. */
static PyObject *
pfl_parts_direct(PyObject *pairs, const char *ps, size_t pn, const char *ss, size_t sn, int want_sha,
                 PyObject *tensors, PyObject *const *types, const char *fs, size_t fn, PyObject *fragment_type,
                 PyObject *rank_type, const pfl_wire *wire)
{
    pfl_ctx c;
    pfl_sink sink = {{NULL, 0, 0}, NULL};
    PyObject *result = NULL, *items[PFL_BATCH];
    size_t nitems = 0;
    int ok = 0;
    if (pfl_ctx_init(&c) < 0) {
        PyErr_Clear();
        return NULL;
    }
    c.fragment_type = fragment_type;
    c.rank_type = rank_type;
    if (want_sha) {
        sink.md = EVP_MD_CTX_new();
        if (sink.md == NULL || EVP_DigestInit_ex(sink.md, cj_sha256_md(), NULL) != 1) goto done;
    }
    if (pfl_sink_write(&sink, ps, pn) < 0 || pfl_sink_write(&sink, "[", 1) < 0) goto done;
    for (Py_ssize_t i = 0;; i++) {
        Py_ssize_t np = PyList_Size(pairs);
        if (np < 0) goto done;
        if (i >= np) break;
        PyObject *pair = PyList_GetItem(pairs, i);
        if (pair == NULL) goto done;
        Py_INCREF(pair);
        Py_ssize_t tn = 0;
        const char *ts = pfl_pair_tail(pair, &tn);
        PyObject *frags = ts == NULL ? NULL : PyTuple_GetItem(pair, 0);
        int rc = frags == NULL ? -1 : pfl_sink_write(&sink, i ? ",{\"fragments\":[" : "{\"fragments\":[", i ? 15 : 14);
        int is_list = frags != NULL && PyList_Check(frags);
        for (Py_ssize_t j0 = 0; rc == 0; j0 += PFL_BATCH) {
            int more = 1;
            for (nitems = 0; nitems < PFL_BATCH && more > 0; nitems++) {
                more = cj_seq_item(frags, is_list, j0 + (Py_ssize_t)nitems, &items[nitems]);
                if (more <= 0) break;
            }
            if (more < 0) rc = -1;
            /* the next batch's objects: a hint only (borrowed pointers, not kept) */
            Py_ssize_t size = is_list ? PyList_Size(frags) : PyTuple_Size(frags);
            for (Py_ssize_t k = j0 + PFL_BATCH; k < j0 + 2 * PFL_BATCH && k < size; k++) {
                const char *next = (const char *)(is_list ? PyList_GetItem(frags, k) : PyTuple_GetItem(frags, k));
                if (next != NULL) {
                    __builtin_prefetch(next - 64);
                    __builtin_prefetch(next);
                }
            }
            if (rc == 0 && nitems) rc = pfl_batch(&sink.out, items, nitems, &c, NULL, 1, j0 != 0);
            if (rc == 0) rc = pfl_sink_write(&sink, "", 0); /* hands full blocks to the digest */
            for (size_t j = 0; j < nitems; j++) Py_DECREF(items[j]);
            nitems = 0;
            if (more == 0) break;
        }
        if (rc == 0) rc = pfl_sink_write(&sink, "],", 2);
        if (rc == 0) rc = pfl_sink_write(&sink, ts + 1, (size_t)(tn - 1));
        Py_DECREF(pair);
        if (rc < 0) goto done;
    }
    if (pfl_sink_write(&sink, "]", 1) < 0) goto done;
    if (wire != NULL) {
        result = pfl_dual_end(&sink, ss, sn, tensors, types, fs, fn, wire);
        ok = result != NULL;
        goto done;
    }
    if (pfl_sink_write(&sink, ss, sn) < 0) goto done;
    if (tensors != NULL && (td_sink_tensors(&sink, tensors, types) < 0 || pfl_sink_write(&sink, fs, fn) < 0))
        goto done;
    result = pfl_sink_result(&sink);
    ok = result != NULL;
done:
    if (!ok && PyErr_Occurred()) PyErr_Clear();
    pfl_ctx_free(&c);
    if (sink.md != NULL) EVP_MD_CTX_free(sink.md);
    cj_free(&sink.out);
    return result;
}

static PyObject *
py_canonical_parts_json(PyObject *Py_UNUSED(module), PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"pairs", "prefix", "suffix", "sha256", "tensors", "after", "types", "wire", NULL};
    PyObject *pairs, *prefix = NULL, *suffix = NULL, *tensors = Py_None, *after = NULL, *type_tuple = NULL;
    PyObject *wire_arg = Py_None;
    int want_sha = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|UUpOUO!O:canonical_parts_json", kwlist, &pairs, &prefix,
                                     &suffix, &want_sha, &tensors, &after, &PyTuple_Type, &type_tuple, &wire_arg))
        return NULL;
    pfl_wire wire = {"", "", "", 0, 0, 0};
    if (wire_arg != Py_None) {
        /* (head, tail, after): the dual form, with tensors and sha256 only */
        if (!PyTuple_CheckExact(wire_arg) || PyTuple_Size(wire_arg) != 3) {
            PyErr_SetString(PyExc_TypeError, "wire must be a (head, tail, after) tuple of str");
            return NULL;
        }
        if (tensors == Py_None || !want_sha) {
            PyErr_SetString(PyExc_ValueError, "wire needs tensors and sha256=True");
            return NULL;
        }
        const char **texts[3] = {&wire.head, &wire.tail, &wire.after};
        size_t *lens[3] = {&wire.hn, &wire.tn, &wire.an};
        static const char *const wire_names[3] = {"wire head", "wire tail", "wire after"};
        for (Py_ssize_t k = 0; k < 3; k++) {
            Py_ssize_t n = 0;
            /* borrowed UTF-8 caches of the tuple's str items: the tuple holds them */
            PyObject *item = PyTuple_GetItem(wire_arg, k);
            const char *text = item == NULL ? NULL : pfl_ascii(item, &n, wire_names[k]);
            if (text == NULL) return NULL;
            *texts[k] = text;
            *lens[k] = (size_t)n;
        }
    }
    if (!PyList_Check(pairs)) {
        PyErr_SetString(PyExc_TypeError, "pairs must be a list");
        return NULL;
    }
    Py_ssize_t pn = 0, sn = 0;
    const char *ps = "", *ss = "";
    if (prefix != NULL && (ps = pfl_ascii(prefix, &pn, "prefix")) == NULL) return NULL;
    if (suffix != NULL && (ss = pfl_ascii(suffix, &sn, "suffix")) == NULL) return NULL;
    if (tensors != Py_None && !PyList_Check(tensors) && !PyTuple_Check(tensors)) {
        PyErr_SetString(PyExc_TypeError, "tensors must be a list or tuple");
        return NULL;
    }
    PyObject *types[TD_TYPES + 2] = {NULL};
    if (type_tuple != NULL || tensors != Py_None) {
        if (type_tuple == NULL || PyTuple_Size(type_tuple) != TD_TYPES + 2) {
            PyErr_SetString(PyExc_TypeError,
                            "types must be (tensor, split, replicated, ownership, fragment, rank) classes");
            return NULL;
        }
        for (Py_ssize_t k = 0; k < TD_TYPES + 2; k++) {
            types[k] = PyTuple_GetItem(type_tuple, k); /* borrowed: the tuple holds them */
            if (types[k] == NULL || !PyType_Check(types[k])) {
                PyErr_SetString(PyExc_TypeError, "types must hold six classes");
                return NULL;
            }
        }
    }
    if (tensors != Py_None) {
        /* the fused form: the batched path or None (nothing raised, nothing observable run) */
        Py_ssize_t an = 0;
        const char *as = "";
        if (after != NULL && (as = pfl_ascii(after, &an, "after")) == NULL) return NULL;
        PyObject *fused = pfl_parts_direct(pairs, ps, (size_t)pn, ss, (size_t)sn, want_sha, tensors, types, as,
                                           (size_t)an, types[TD_TYPES], types[TD_TYPES + 1],
                                           wire_arg == Py_None ? NULL : &wire);
        if (fused != NULL || PyErr_Occurred()) return fused;
        Py_RETURN_NONE;
    }
    if (type_tuple != NULL) {
        /* the batched path when every value is of the exact classes; else (it read nothing
         * observable) the in-order encoding below, which raises the first error in list order */
        PyObject *result = pfl_parts_direct(pairs, ps, (size_t)pn, ss, (size_t)sn, want_sha, NULL, types, "", 0,
                                            types[TD_TYPES], types[TD_TYPES + 1], NULL);
        if (result != NULL || PyErr_Occurred()) return result;
    }
    PyObject *result = NULL;
    pfl_ctx c;
    if (pfl_ctx_init(&c) < 0) return NULL;
    cj_buf b = {NULL, 0, 0};
    int rc = cj_write(&b, ps, (size_t)pn);
    if (rc == 0) rc = cj_putc(&b, '[');
    for (Py_ssize_t i = 0; rc == 0; i++) {
        Py_ssize_t n = PyList_Size(pairs);
        if (n < 0) {
            rc = -1;
            break;
        }
        if (i >= n) break;
        PyObject *pair = PyList_GetItem(pairs, i);
        if (pair == NULL) {
            rc = -1;
            break;
        }
        Py_INCREF(pair);
        PyObject *frags = NULL, *tail = NULL;
        if (!PyTuple_Check(pair) || PyTuple_Size(pair) != 2) {
            PyErr_SetString(PyExc_TypeError, "pairs must hold (fragments, tail) tuples");
            rc = -1;
        }
        else {
            frags = PyTuple_GetItem(pair, 0);
            tail = PyTuple_GetItem(pair, 1);
            if (frags == NULL || tail == NULL) rc = -1;
        }
        Py_ssize_t tn = 0;
        const char *ts = NULL;
        if (rc == 0) {
            if (!PyUnicode_Check(tail)) {
                PyErr_SetString(PyExc_TypeError, "tail must be a str");
                rc = -1;
            }
            else if ((ts = PyUnicode_AsUTF8AndSize(tail, &tn)) == NULL) rc = -1;
            else if (tn < 3 || ts[0] != '{' || ts[1] == '}') {
                PyErr_SetString(PyExc_ValueError, "tail must be a non-empty JSON object");
                rc = -1;
            }
            for (Py_ssize_t k = 0; rc == 0 && k < tn; k++) {
                if ((unsigned char)ts[k] >= 0x80) {
                    PyErr_SetString(PyExc_ValueError, "tail must be ASCII");
                    rc = -1;
                }
            }
        }
        if (rc == 0 && i) rc = cj_putc(&b, ',');
        if (rc == 0) rc = cj_write(&b, "{\"fragments\":", 13);
        if (rc == 0) rc = pfl_fragments(&b, frags, &c);
        if (rc == 0) rc = cj_putc(&b, ',');
        if (rc == 0) rc = cj_write(&b, ts + 1, (size_t)(tn - 1));
        Py_DECREF(pair);
    }
    if (rc == 0) rc = cj_putc(&b, ']');
    if (rc == 0) rc = cj_write(&b, ss, (size_t)sn);
    if (rc == 0)
        result = want_sha ? sha256_text("", b.data, b.len) : PyUnicode_DecodeASCII(b.data, (Py_ssize_t)b.len, NULL);
    cj_free(&b);
    pfl_ctx_free(&c);
    return result;
}

/* ---- tensor descriptors ----------------------------------------------------------- *
 * canonical_json([tensor_object(t) for t in tensors]) of weight/_canonical.py without the
 * dicts. As there, every attribute of every tensor is read (in tensor_object's order) before
 * anything is encoded: a failing read anywhere wins over an encoding error, and the first
 * encoding error (in output order) is raised otherwise. */

enum { TD_ID, TD_SHAPE, TD_DTYPE, TD_ITEMSIZE, TD_SHARD, TD_FP, TD_AXES, TD_LAYER, TD_EXPERT, TD_KIND, TD_DIM, TD_N };
static const char *const td_names[TD_N] = {"tensor_id", "global_shape", "dtype", "itemsize", "shard_dims",
                                           "layout_fingerprint", "parallel_axes", "layer_id", "expert_id",
                                           "kind", "dim"};

typedef struct {
    PyObject *kind; /* strong */
    PyObject *dim;  /* strong, split axes only */
    int semantics;  /* 0 split, 1 replicated, 2 ownership */
} td_axis;

typedef struct {
    td_axis *items;
    size_t n, cap;
} td_axes;

static void
td_axes_clear(td_axes *a)
{
    for (size_t i = 0; i < a->n; i++) {
        Py_XDECREF(a->items[i].kind);
        Py_XDECREF(a->items[i].dim);
    }
    a->n = 0;
}

/* Read the axes of one tensor: axis_identity's reads for each item of parallel_axes. */
static int
td_read_axes(td_axes *a, PyObject *axes, PyObject *split_type, PyObject *replicated_type, PyObject *const *names)
{
    PyObject *it = PyObject_GetIter(axes);
    if (it == NULL) return -1;
    PyObject *axis;
    int rc = 0;
    while (rc == 0 && (axis = PyIter_Next(it)) != NULL) {
        int split = PyObject_IsInstance(axis, split_type), replicated = 0;
        if (split == 0) replicated = PyObject_IsInstance(axis, replicated_type);
        if (split < 0 || replicated < 0) rc = -1;
        if (rc == 0 && a->n == a->cap) {
            size_t cap = a->cap ? 2 * a->cap : 8;
            td_axis *grown = mr_alloc_array(cap, sizeof(td_axis));
            if (grown == NULL) rc = -1;
            else {
                if (a->n) memcpy(grown, a->items, a->n * sizeof(td_axis));
                PyMem_Free(a->items);
                a->items = grown;
                a->cap = cap;
            }
        }
        if (rc == 0) {
            td_axis *slot = &a->items[a->n];
            slot->semantics = split ? 0 : replicated ? 1 : 2;
            slot->dim = NULL;
            slot->kind = PyObject_GetAttr(axis, names[TD_KIND]);
            if (slot->kind == NULL) rc = -1;
            else {
                a->n++;
                if (split && (slot->dim = PyObject_GetAttr(axis, names[TD_DIM])) == NULL) rc = -1;
            }
        }
        Py_DECREF(axis);
    }
    Py_DECREF(it);
    if (rc == 0 && PyErr_Occurred()) rc = -1;
    return rc;
}

static int
td_key(cj_buf *b, const char *text)
{
    return cj_write(b, text, strlen(text));
}

/* Encode one tensor in sorted key order from its read values. */
static int
td_encode(cj_buf *b, PyObject *const *v, const td_axes *a)
{
    if (td_key(b, "{\"dtype\":") < 0 || cj_encode(b, v[TD_DTYPE], 1) < 0) return -1;
    if (td_key(b, ",\"expert_id\":") < 0 || cj_encode(b, v[TD_EXPERT], 1) < 0) return -1;
    if (td_key(b, ",\"global_shape\":") < 0 || cj_encode(b, v[TD_SHAPE], 1) < 0) return -1;
    if (td_key(b, ",\"itemsize\":") < 0 || cj_encode(b, v[TD_ITEMSIZE], 1) < 0) return -1;
    if (td_key(b, ",\"layer_id\":") < 0 || cj_encode(b, v[TD_LAYER], 1) < 0) return -1;
    if (td_key(b, ",\"layout_fingerprint\":") < 0 || cj_encode(b, v[TD_FP], 1) < 0) return -1;
    if (td_key(b, ",\"parallel_axes\":[") < 0) return -1;
    for (size_t i = 0; i < a->n; i++) {
        const td_axis *x = &a->items[i];
        if (i && cj_putc(b, ',') < 0) return -1;
        if (x->semantics == 0) {
            if (td_key(b, "{\"dim\":") < 0 || cj_encode(b, x->dim, 1) < 0 || td_key(b, ",\"kind\":") < 0) return -1;
        }
        else if (td_key(b, "{\"kind\":") < 0) return -1;
        if (cj_encode(b, x->kind, 1) < 0) return -1;
        static const char *const semantics[3] = {",\"semantics\":\"split\"}", ",\"semantics\":\"replicated\"}",
                                                 ",\"semantics\":\"ownership\"}"};
        if (td_key(b, semantics[x->semantics]) < 0) return -1;
    }
    if (td_key(b, "],\"shard_dims\":") < 0 || cj_encode(b, v[TD_SHARD], 1) < 0) return -1;
    if (td_key(b, ",\"tensor_id\":") < 0 || cj_encode(b, v[TD_ID], 1) < 0) return -1;
    return cj_putc(b, '}');
}

/* Borrowed values state[names[k]] (k < n) from one scan of the state's entries, matching the
 * interned names by identity (no hashing, no Python code); exact when every key met is an exact
 * str (no two keys of the dict are then equal). A name not met leaves v[k] NULL. Returns 0, or
 * -1 (no exception) when some key is not an exact str. */
static int
cj_scan_names(PyObject *state, PyObject *const *names, int n, PyObject **v)
{
    for (int k = 0; k < n; k++) v[k] = NULL;
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(state, &pos, &key, &value)) {
        int k = 0;
        while (k < n && key != names[k]) k++;
        if (k < n) v[k] = value;
        else if (!PyUnicode_CheckExact(key)) return -1;
    }
    return 0;
}

/* Identity memo of one call: the text of each distinct object encoded so far. A slot holds a
 * strong reference to its object, so no address is reused while the call runs. */
typedef struct {
    pfl_slot *slots; /* open addressing, linear probing; slot.rank is the object */
    size_t cap;      /* 0 or a power of two */
    size_t used;
    cj_buf text;
} cj_memo;

static void
cj_memo_free(cj_memo *m)
{
    for (size_t i = 0; i < m->cap; i++) Py_XDECREF(m->slots[i].rank);
    PyMem_Free(m->slots);
    m->slots = NULL;
    m->cap = m->used = 0;
    cj_free(&m->text);
}

static size_t
cj_memo_slot(const cj_memo *m, const PyObject *obj)
{
    uint64_t x = (uint64_t)(uintptr_t)obj;
    x ^= x >> 33;
    x *= 0xFF51AFD7ED558CCDULL;
    x ^= x >> 33;
    size_t mask = m->cap - 1, i = (size_t)x & mask;
    while (m->slots[i].rank != NULL && m->slots[i].rank != obj) i = (i + 1) & mask;
    return i;
}

/* The memo's slot of obj, or NULL when obj has none. */
static const pfl_slot *
cj_memo_find(const cj_memo *m, const PyObject *obj)
{
    if (m->cap == 0) return NULL;
    const pfl_slot *slot = &m->slots[cj_memo_slot(m, obj)];
    return slot->rank == obj ? slot : NULL;
}

/* Record m->text[off:] as the text of obj (not in the memo yet). 0 or -1 (MemoryError). */
static int
cj_memo_add(cj_memo *m, PyObject *obj, size_t off)
{
    if (m->cap == 0 || (m->used + 1) * 2 > m->cap) {
        size_t cap = m->cap ? m->cap : 32;
        while ((m->used + 1) * 2 > cap) {
            if (cap > ((size_t)PY_SSIZE_T_MAX) / (2 * sizeof(pfl_slot))) {
                PyErr_NoMemory();
                return -1;
            }
            cap *= 2;
        }
        pfl_slot *old = m->slots;
        size_t old_cap = m->cap;
        pfl_slot *grown = mr_alloc_array(cap, sizeof(pfl_slot));
        if (grown == NULL) return -1;
        for (size_t i = 0; i < cap; i++) grown[i].rank = NULL;
        m->slots = grown;
        m->cap = cap;
        for (size_t i = 0; i < old_cap; i++)
            if (old[i].rank != NULL) m->slots[cj_memo_slot(m, old[i].rank)] = old[i];
        PyMem_Free(old);
    }
    pfl_slot *slot = &m->slots[cj_memo_slot(m, obj)];
    Py_INCREF(obj);
    slot->rank = obj;
    slot->off = off;
    slot->len = m->text.len - off;
    m->used++;
    return 0;
}

/* Append the canonical JSON list of axis_identity(axis) for an exact tuple of exactly the three
 * axis classes (checked by the caller), each axis read from its state dict (no Python code
 * runs). Each axis object is encoded once per call. 0, or -1 (the caller declines). */
static int
td_axes_text(cj_buf *b, cj_memo *memo, PyObject *axes, PyObject *const *types, PyObject *const *names)
{
    Py_ssize_t na = PyTuple_Size(axes);
    if (na < 0 || cj_putc(b, '[') < 0) return -1;
    for (Py_ssize_t k = 0; k < na; k++) {
        PyObject *axis = PyTuple_GetItem(axes, k); /* in range; the tuple holds it */
        if (axis == NULL || (k && cj_putc(b, ',') < 0)) return -1;
        const pfl_slot *hit = cj_memo_find(memo, axis);
        if (hit != NULL) {
            if (cj_write(b, memo->text.data + hit->off, hit->len) < 0) return -1;
            continue;
        }
        PyObject *kind_type = (PyObject *)Py_TYPE(axis);
        int semantics = kind_type == types[TD_T_SPLIT] ? 0 : kind_type == types[TD_T_REPLICATED] ? 1 : 2;
        PyObject *state = PyObject_GenericGetDict(axis, NULL);
        if (state == NULL) return -1;
        PyObject *v[2]; /* kind, dim */
        if (!PyDict_Check(state) || cj_scan_names(state, names + TD_KIND, 2, v) < 0 || v[0] == NULL ||
            (semantics == 0 && v[1] == NULL)) {
            Py_DECREF(state);
            return -1;
        }
        Py_INCREF(v[0]);
        Py_XINCREF(v[1]);
        cj_buf *t = &memo->text;
        size_t off = t->len;
        int rc = 0;
        if (semantics == 0) {
            rc = cj_write(t, "{\"dim\":", 7);
            if (rc == 0) rc = cj_encode(t, v[1], 1);
            if (rc == 0) rc = cj_write(t, ",\"kind\":", 8);
        }
        else rc = cj_write(t, "{\"kind\":", 8);
        if (rc == 0) rc = cj_encode(t, v[0], 1);
        static const char *const texts[3] = {",\"semantics\":\"split\"}", ",\"semantics\":\"replicated\"}",
                                             ",\"semantics\":\"ownership\"}"};
        if (rc == 0) rc = cj_write(t, texts[semantics], strlen(texts[semantics]));
        Py_DECREF(v[0]);
        Py_XDECREF(v[1]);
        Py_DECREF(state);
        if (rc == 0) rc = cj_memo_add(memo, axis, off);
        if (rc == 0) rc = cj_write(b, t->data + off, t->len - off);
        if (rc < 0) return -1;
    }
    return cj_putc(b, ']');
}

/* The canonical JSON list of tensors (canonical_tensors_json's text) written into the sink as it
 * is encoded (no text object, no copy). Only for exactly types[TD_T_TENSOR] descriptors whose
 * parallel_axes is an exact tuple of exactly the three axis classes, every field read from the
 * state dict (what the attribute reads return for these classes: no Python code runs); anything
 * else (a field missing from the dict, a key not an exact str) declines. 0, or -1 (the caller
 * declines). */
static int
td_sink_tensors(pfl_sink *s, PyObject *tensors, PyObject *const *types)
{
    PyObject *split_type = types[TD_T_SPLIT], *replicated_type = types[TD_T_REPLICATED];
    PyObject *names[TD_N];
    int nnames = 0, rc = 0;
    for (; nnames < TD_N && rc == 0; nnames++) {
        names[nnames] = PyUnicode_InternFromString(td_names[nnames]);
        if (names[nnames] == NULL) rc = -1;
    }
    if (rc < 0) nnames--; /* the failed slot holds NULL */
    cj_memo memo = {NULL, 0, 0, {NULL, 0, 0}};
    int is_list = PyList_Check(tensors);
    if (rc == 0) rc = pfl_sink_write(s, "[", 1);
    /* in batches, one level at a time over the batch (as pfl_encode_batched: the tensors are
     * scattered in memory, and no read here runs Python code) */
    PyObject *items[PFL_BATCH], *states[PFL_BATCH];
    PyObject *v[PFL_BATCH][TD_EXPERT + 1];
    int done = 0;
    for (Py_ssize_t i0 = 0; rc == 0 && !done; i0 += PFL_BATCH) {
        size_t nb = 0, nstates = 0;
        for (; nb < PFL_BATCH; nb++) {
            int more = cj_seq_item(tensors, is_list, i0 + (Py_ssize_t)nb, &items[nb]);
            if (more < 0) rc = -1;
            if (more <= 0) {
                done = 1;
                break;
            }
        }
        /* the next batch's objects: a hint only (borrowed pointers, not kept) */
        Py_ssize_t size = is_list ? PyList_Size(tensors) : PyTuple_Size(tensors);
        for (Py_ssize_t k = i0 + PFL_BATCH; k < i0 + 2 * PFL_BATCH && k < size; k++) {
            PyObject *next = is_list ? PyList_GetItem(tensors, k) : PyTuple_GetItem(tensors, k);
            if (next != NULL) pfl_prefetch(next, 0);
        }
        for (size_t j = 0; rc == 0 && j < nb; j++) {
            if ((PyObject *)Py_TYPE(items[j]) != types[TD_T_TENSOR] ||
                (states[j] = PyObject_GenericGetDict(items[j], NULL)) == NULL) {
                rc = -1;
                break;
            }
            nstates++;
            if (!PyDict_Check(states[j])) rc = -1;
        }
        for (size_t j = 0; rc == 0 && j < nb; j++) {
            Py_ssize_t pos = 0;
            PyObject *key, *value;
            (void)PyDict_Next(states[j], &pos, &key, &value);
        }
        /* borrowed fields (no Python code runs until they are all held) */
        for (size_t j = 0; rc == 0 && j < nb; j++) {
            PyObject **f = v[j];
            if (cj_scan_names(states[j], names, TD_EXPERT + 1, f) < 0) rc = -1;
            for (int k = 0; k <= TD_EXPERT && rc == 0; k++)
                if (f[k] == NULL) rc = -1;
            if (rc < 0) break;
            pfl_prefetch(f[TD_ID], 96);
            pfl_prefetch(f[TD_AXES], 0);
            pfl_prefetch(f[TD_SHARD], 0);
            pfl_prefetch(f[TD_SHAPE], 0);
            pfl_prefetch(f[TD_EXPERT], 0);
            pfl_prefetch(f[TD_LAYER], 0);
        }
        /* the fields stay borrowed from the held state dicts: a dict changes only through Python
         * code, which none of the encoding below runs (exact classes, every caller under
         * canonical_parts_json with the collector paused; cj_encode only on its error path, after
         * which no field is read) */
        for (size_t j = 0; rc == 0 && j < nb; j++) {
            PyObject *raw = v[j][TD_AXES];
            Py_ssize_t na = PyTuple_CheckExact(raw) ? PyTuple_Size(raw) : -1;
            if (na < 0) rc = -1;
            for (Py_ssize_t k = 0; k < na && rc == 0; k++) {
                PyObject *kind = (PyObject *)Py_TYPE(PyTuple_GetItem(raw, k)); /* in range */
                if (kind != split_type && kind != replicated_type && kind != types[TD_T_OWNERSHIP]) rc = -1;
            }
        }
        for (size_t j = 0; rc == 0 && j < nb; j++) {
            PyObject *const *f = v[j];
            cj_buf *b = &s->out;
            if (i0 + (Py_ssize_t)j) rc = cj_putc(b, ',');
            if (rc == 0) rc = cj_write(b, "{\"dtype\":", 9);
            if (rc == 0) rc = cj_encode(b, f[TD_DTYPE], 1);
            if (rc == 0) rc = cj_write(b, ",\"expert_id\":", 13);
            if (rc == 0) rc = cj_encode(b, f[TD_EXPERT], 1);
            if (rc == 0) rc = cj_write(b, ",\"global_shape\":", 16);
            if (rc == 0) rc = pfl_int_tuple(b, f[TD_SHAPE]);
            if (rc == 0) rc = cj_write(b, ",\"itemsize\":", 12);
            if (rc == 0) rc = cj_encode(b, f[TD_ITEMSIZE], 1);
            if (rc == 0) rc = cj_write(b, ",\"layer_id\":", 12);
            if (rc == 0) rc = cj_encode(b, f[TD_LAYER], 1);
            if (rc == 0) rc = cj_write(b, ",\"layout_fingerprint\":", 22);
            if (rc == 0) rc = cj_encode(b, f[TD_FP], 1);
            if (rc == 0) rc = cj_write(b, ",\"parallel_axes\":", 17);
            if (rc == 0) rc = td_axes_text(b, &memo, f[TD_AXES], types, names);
            if (rc == 0) rc = cj_write(b, ",\"shard_dims\":", 14);
            if (rc == 0) rc = pfl_int_tuple(b, f[TD_SHARD]);
            if (rc == 0) rc = cj_write(b, ",\"tensor_id\":", 13);
            if (rc == 0) rc = cj_encode(b, f[TD_ID], 1);
            if (rc == 0) rc = cj_putc(b, '}');
            if (rc == 0) rc = pfl_sink_write(s, "", 0); /* hands full blocks to the digest */
        }
        for (size_t j = 0; j < nstates; j++) Py_DECREF(states[j]);
        for (size_t j = 0; j < nb; j++) Py_DECREF(items[j]);
    }
    if (rc == 0) rc = pfl_sink_write(s, "]", 1);
    cj_memo_free(&memo);
    for (int k = 0; k < nnames; k++) Py_DECREF(names[k]);
    return rc;
}

static PyObject *
py_canonical_tensors_json(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *tensors, *split_type, *replicated_type;
    if (!PyArg_ParseTuple(args, "OO!O!:canonical_tensors_json", &tensors, &PyType_Type, &split_type, &PyType_Type,
                          &replicated_type))
        return NULL;
    if (!PyList_Check(tensors) && !PyTuple_Check(tensors)) {
        PyErr_SetString(PyExc_TypeError, "tensors must be a list or tuple");
        return NULL;
    }
    int is_list = PyList_Check(tensors);
    PyObject *names[TD_N];
    int nnames = 0;
    for (; nnames < TD_N; nnames++) {
        names[nnames] = PyUnicode_InternFromString(td_names[nnames]);
        if (names[nnames] == NULL) break;
    }
    cj_buf b = {NULL, 0, 0};
    td_axes axes = {NULL, 0, 0};
    PyObject *saved_type = NULL, *saved_value = NULL, *saved_tb = NULL; /* the first encoding error */
    int rc = nnames == TD_N ? cj_putc(&b, '[') : -1;
    for (Py_ssize_t i = 0; rc == 0; i++) {
        PyObject *tensor;
        int more = cj_seq_item(tensors, is_list, i, &tensor);
        if (more < 0) rc = -1;
        if (more <= 0) break;
        PyObject *v[TD_AXES + 3] = {NULL};
        int got = 0;
        for (; got <= TD_EXPERT && rc == 0; got++) {
            v[got] = PyObject_GetAttr(tensor, names[got]);
            if (v[got] == NULL) rc = -1;
            /* iterated here: an exact tuple or list only (a subclass's __iter__ would run inside
             * the pass, AUDIT5 F4); anything else the Python form encodes */
            else if (got == TD_AXES && !PyTuple_CheckExact(v[got]) && !PyList_CheckExact(v[got])) rc = 1;
            else if (got == TD_AXES) rc = td_read_axes(&axes, v[got], split_type, replicated_type, names);
        }
        if (rc == 0 && saved_type == NULL) {
            if ((i && cj_putc(&b, ',') < 0) || td_encode(&b, v, &axes) < 0) {
                PyErr_Fetch(&saved_type, &saved_value, &saved_tb);
                if (saved_type == NULL) rc = -1; /* cannot happen: a failure sets an exception */
            }
        }
        for (int k = 0; k < got; k++) Py_XDECREF(v[k]);
        td_axes_clear(&axes);
        Py_DECREF(tensor);
    }
    PyObject *result = NULL;
    if (rc == 0 && saved_type != NULL) {
        PyErr_Restore(saved_type, saved_value, saved_tb);
        saved_type = saved_value = saved_tb = NULL;
    }
    else if (rc == 0 && cj_putc(&b, ']') == 0) result = PyUnicode_DecodeASCII(b.data, (Py_ssize_t)b.len, NULL);
    else if (rc == 1) result = Py_NewRef(Py_None); /* not decided here: the Python form encodes */
    Py_XDECREF(saved_type);
    Py_XDECREF(saved_value);
    Py_XDECREF(saved_tb);
    PyMem_Free(axes.items);
    cj_free(&b);
    for (int k = 0; k < nnames; k++) Py_DECREF(names[k]);
    return result;
}

/* ---- sorting by str keys ------------------------------------------------------- */

typedef struct {
    uint64_t head;       /* 8 bytes of the key from the common prefix on, big-endian, zero padded */
    const char *s;       /* UTF-8 bytes (borrowed from the key's cache) */
    size_t len;
    size_t index;        /* input position: the tie-break that keeps the sort stable */
} strkey_entry;

static int
strkey_cmp(const void *pa, const void *pb)
{
    const strkey_entry *a = pa, *b = pb;
    if (a->head != b->head) return a->head < b->head ? -1 : 1;
    size_t m = a->len < b->len ? a->len : b->len;
    int c = memcmp(a->s, b->s, m);
    if (c != 0) return c < 0 ? -1 : 1;
    if (a->len != b->len) return a->len < b->len ? -1 : 1;
    return a->index < b->index ? -1 : (a->index > b->index ? 1 : 0);
}

/* Key i of a sort: e[i] holds s[0:len] and its position, e[i].head its bytes 0..7 and
 * tmp[i].head its bytes 8..15 (big-endian, zero padded), read now, while the caller has just
 * touched the key: strkey_sort then finds the common prefix and the heads without visiting
 * the scattered keys again (when the common prefix is at most 8 bytes). */
static inline void
strkey_set(strkey_entry *e, strkey_entry *tmp, size_t i, const char *s, size_t len)
{
    uint64_t w[2] = {0, 0};
    if (len >= 16) { /* two loads, as big-endian words */
        memcpy(w, s, 16);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        w[0] = __builtin_bswap64(w[0]);
        w[1] = __builtin_bswap64(w[1]);
#endif
    }
    else {
        for (size_t k = 0; k < 16; k++) w[k >> 3] = (w[k >> 3] << 8) | (k < len ? (unsigned char)s[k] : 0u);
    }
    e[i].s = s;
    e[i].len = len;
    e[i].index = i;
    e[i].head = w[0];
    tmp[i].head = w[1];
}

/* Runs of at most this many entries are sorted by insertion (strkey_cmp), not refined further. */
#define STRKEY_SMALL_RUN 16
/* strkey_refine goes this many 8-byte steps past a run's first head, then sorts what is left
 * of a run by comparison (a bound on its recursion: keys equal over 64 more bytes are rare). */
#define STRKEY_REFINE_STEPS 8

/* Insertion sort of e[0:n] by strkey_cmp (small runs: no call through qsort per comparison). */
static void
strkey_insertion(strkey_entry *e, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        strkey_entry v = e[i];
        size_t j = i;
        while (j > 0 && strkey_cmp(&e[j - 1], &v) > 0) {
            e[j] = e[j - 1];
            j--;
        }
        e[j] = v;
    }
}

/* Bytes at..at+7 of an entry's key, big-endian, zero padded past its end. */
static inline uint64_t
strkey_head_at(const strkey_entry *x, size_t at)
{
    uint64_t h = 0;
    if (at < x->len && x->len - at >= 8) {
        memcpy(&h, x->s + at, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        h = __builtin_bswap64(h);
#endif
        return h;
    }
    for (size_t k = 0; k < 8; k++) h = (h << 8) | (at + k < x->len ? (unsigned char)x->s[at + k] : 0u);
    return h;
}

/* Sorts a run e[0:n] (n >= 2) of keys whose bytes before `at` agree once zero padded (a run of
 * equal heads), in strkey_cmp's order, stable: the keys' bytes at..at+7 as the head (stable
 * radix sort of (head, position) pairs in kv, n entries, then the entries gathered through tmp),
 * then each run of equal heads the same way 8 bytes on; a run past every key's end holds keys
 * equal once padded, which differ only in trailing zero bytes (their lengths) or are equal (in
 * input order already). Each key's bytes are read once a step, where qsort compared whole keys
 * about log2(n) times each. Small runs, runs STRKEY_REFINE_STEPS steps deep, and any run when kv
 * is NULL or the radix sort has no memory, are sorted by strkey_cmp. The heads of e are left as
 * the last step set them: two adjacent entries with different heads still have different keys
 * (strkey_distinct reads the bytes only where heads tie). */
static void
strkey_refine(strkey_entry *e, strkey_entry *tmp, mr_kv *kv, size_t n, size_t at, int steps)
{
    if (n <= STRKEY_SMALL_RUN) {
        strkey_insertion(e, n);
        return;
    }
    size_t maxlen = 0;
    for (size_t k = 0; k < n; k++)
        if (e[k].len > maxlen) maxlen = e[k].len;
    if (kv == NULL || steps >= STRKEY_REFINE_STEPS || at >= maxlen) {
        qsort(e, n, sizeof(strkey_entry), strkey_cmp);
        return;
    }
    for (size_t k = 0; k < n; k++) {
        e[k].head = strkey_head_at(&e[k], at);
        kv[k].key = e[k].head;
        kv[k].idx = k;
    }
    if (mr_radix_sort(kv, n) < 0) {
        qsort(e, n, sizeof(strkey_entry), strkey_cmp);
        return;
    }
    for (size_t k = 0; k < n; k++) tmp[k] = e[kv[k].idx];
    memcpy(e, tmp, n * sizeof(strkey_entry));
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        while (j < n && e[j].head == e[i].head) j++;
        if (j - i > 1) strkey_refine(e + i, tmp + i, kv + i, j - i, at + 8, steps + 1);
        i = j;
    }
}

/* 0 when each of the 8 bytes of w is a lowercase hex digit ('0'-'9', 'a'-'f'), else nonzero.
 * Per byte (below 0x80 once the high bits are known clear, so no carry crosses bytes): adding
 * 0x80 - lo sets its high bit when it is at least lo, adding 0x7f - hi when it is above hi. */
static inline uint64_t
strkey_not_hex(uint64_t w)
{
    const uint64_t high = 0x8080808080808080ull, ones = 0x0101010101010101ull;
    uint64_t low7 = w & ~high;
    uint64_t digit = (low7 + ones * (0x80 - '0')) & ~(low7 + ones * (0x7f - '9'));
    uint64_t letter = (low7 + ones * (0x80 - 'a')) & ~(low7 + ones * (0x7f - 'f'));
    return (w & high) | (~(digit | letter) & high);
}

/* The 32-bit value of 8 lowercase hex digits (big-endian: the first digit the highest nibble),
 * increasing with the bytes: '0'-'9' are 0-9 and 'a'-'f' 10-15 ((b & 15) + 9 for a letter,
 * whose bit 6 is set). */
static inline uint64_t
strkey_hex_value(uint64_t w)
{
    const uint64_t ones = 0x0101010101010101ull;
    uint64_t v = (w & (ones * 0x0f)) + 9 * ((w >> 6) & ones);
    v = (v | (v >> 4)) & 0x00ff00ff00ff00ffull;
    v = (v | (v >> 8)) & 0x0000ffff0000ffffull;
    return (v | (v >> 16)) & 0xffffffffull;
}

/* Kernel: stable sort of e[0:n] by key bytes (UTF-8 byte order == code point order); tmp: n scratch entries,
 * the keys given by strkey_set. */
static void
strkey_sort(strkey_entry *e, strkey_entry *tmp, size_t n)
{
    if (n == 0) return;
    /* The common prefix of all keys from their first 16 bytes: a zero-padded word pair that
     * agrees with key 0's on p bytes agrees in the real bytes up to the shorter length, so
     * lcp = min(those p, every length) when that is below 16; from 16 on the keys decide. */
    size_t lcp = 16, minlen = e[0].len;
    for (size_t i = 1; i < n; i++) {
        if (e[i].len < minlen) minlen = e[i].len;
        uint64_t x = e[i].head ^ e[0].head;
        size_t p = x ? (size_t)__builtin_clzll(x) / 8 : 8;
        if (p == 8) {
            uint64_t y = tmp[i].head ^ tmp[0].head;
            p = y ? 8 + (size_t)__builtin_clzll(y) / 8 : 16;
        }
        if (p < lcp) lcp = p;
    }
    if (minlen < lcp) lcp = minlen;
    if (lcp <= 8) {
        /* the head (bytes lcp..lcp+7) from the two words already read */
        for (size_t i = 0; i < n; i++)
            e[i].head = lcp == 0 ? e[i].head
                        : lcp == 8 ? tmp[i].head
                                   : (e[i].head << (8 * lcp)) | (tmp[i].head >> (64 - 8 * lcp));
    }
    else {
        /* a longer common prefix: as before, from the keys' bytes */
        lcp = e[0].len;
        for (size_t i = 1; i < n && lcp > 0; i++) {
            size_t m = e[i].len < lcp ? e[i].len : lcp, k = 0;
            while (k < m && e[i].s[k] == e[0].s[k]) k++;
            lcp = k;
        }
        for (size_t i = 0; i < n; i++) {
            uint64_t h = 0;
            for (size_t k = 0; k < 8; k++) {
                size_t at = lcp + k;
                h = (h << 8) | (at < e[i].len ? (unsigned char)e[i].s[at] : 0u);
            }
            e[i].head = h;
        }
    }
    /* LSD radix sort by head (stable, so equal heads keep input order), skipping byte
     * positions where every head agrees; then runs of equal heads by the bytes after them
     * (strkey_refine).
     * The digit passes move (head, position) pairs, half an entry (mr_radix_sort), and the
     * entries are gathered once in their order; without memory for the pairs, the entries
     * themselves are moved. */
    {
        mr_kv *kv = n > 32 ? mr_kalloc(n, sizeof(mr_kv)) : NULL;
        if (kv != NULL) {
            uint64_t not_hex = 0;
            for (size_t i = 0; i < n; i++) {
                kv[i].key = e[i].head;
                kv[i].idx = i;
                not_hex |= strkey_not_hex(e[i].head);
            }
            /* heads of lowercase hex digits only (derived ids, "sha256:" + hex): the same order
             * from their 32-bit values, whose upper digits the radix sort then skips */
            if (not_hex == 0)
                for (size_t i = 0; i < n; i++) kv[i].key = strkey_hex_value(kv[i].key);
            if (mr_radix_sort(kv, n) < 0) {
                free(kv);
                kv = NULL;
            }
        }
        if (kv != NULL) {
            for (size_t k = 0; k < n; k++) tmp[k] = e[kv[k].idx];
            memcpy(e, tmp, n * sizeof(strkey_entry));
        }
        size_t count[256];
        for (unsigned shift = 0; shift < 64 && kv == NULL; shift += 8) {
            memset(count, 0, sizeof(count));
            for (size_t i = 0; i < n; i++) count[(e[i].head >> shift) & 0xFF]++;
            if (count[(e[0].head >> shift) & 0xFF] == n) continue;
            size_t total = 0;
            for (size_t b = 0; b < 256; b++) {
                size_t c = count[b];
                count[b] = total;
                total += c;
            }
            for (size_t i = 0; i < n; i++) tmp[count[(e[i].head >> shift) & 0xFF]++] = e[i];
            memcpy(e, tmp, n * sizeof(strkey_entry));
        }
        /* runs of equal heads: the bytes after the head decide (strkey_refine, the pairs'
         * memory reused; without it, by comparison) */
        for (size_t i = 0; i < n;) {
            size_t j = i + 1;
            while (j < n && e[j].head == e[i].head) j++;
            if (j - i > 1) strkey_refine(e + i, tmp + i, kv == NULL ? NULL : kv + i, j - i, lcp + 8, 0);
            i = j;
        }
        free(kv);
    }
}

/* The list rows with rows[e[k].index] = k (each input position's place in the sorted order),
 * tmp (n entries, free after the sort) as scratch. The int objects are made in list order, so
 * that a later read of the list in order visits them in the order they lie in memory (made in
 * sorted order they would be scattered over it). A new list, or NULL with an exception. */
static PyObject *
strkey_rows(const strkey_entry *e, strkey_entry *tmp, Py_ssize_t n, int as_tuple)
{
    for (Py_ssize_t k = 0; k < n; k++) tmp[e[k].index].index = (size_t)k;
    PyObject *rows = as_tuple ? PyTuple_New(n) : PyList_New(n);
    for (Py_ssize_t i = 0; rows != NULL && i < n; i++) {
        PyObject *pos = PyLong_FromSize_t(tmp[i].index);
        if (pos == NULL || (as_tuple ? PyTuple_SetItem(rows, i, pos) : PyList_SetItem(rows, i, pos)) < 0)
            Py_CLEAR(rows); /* steals pos */
    }
    return rows;
}

/* strkey_rows packed: bytes of n native int64 (array("q")'s layout), entry i being input position
 * i's place in the sorted order; no int objects made (FragmentTable.pack_objects reads this form
 * directly). A new bytes object, or NULL with an exception. */
static PyObject *
strkey_rows_packed(const strkey_entry *e, Py_ssize_t n)
{
    size_t size;
    if (n < 0 || __builtin_mul_overflow((size_t)n, sizeof(int64_t), &size) || size > (size_t)PY_SSIZE_T_MAX) {
        PyErr_NoMemory();
        return NULL;
    }
    PyObject *rows = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)size);
    char *p = rows == NULL ? NULL : PyBytes_AsString(rows);
    if (p == NULL) {
        Py_XDECREF(rows);
        return NULL;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        int64_t v = (int64_t)k;
        memcpy(p + e[k].index * sizeof(int64_t), &v, sizeof(v)); /* index < n: a permutation */
    }
    return rows;
}

/* sorted(items, key=...) given keys[i] == key(items[i]), when every key is an exact str
 * (a new list); None (nothing raised) when some key is not, or cannot be encoded. */
static PyObject *sorted_by_keys_copy(PyObject *items, PyObject *keys, Py_ssize_t n, int want_rows);

/* After strkey_sort: 1 when no two keys are equal (adjacent in sorted order: equal heads, then
 * equal lengths and bytes; UTF-8 bytes are equal exactly when the strs are), else 0. Keys with
 * different heads differ (the heads are their bytes from the common prefix on), so the scattered
 * key bytes are read only where two heads tie. */
static int
strkey_distinct(const strkey_entry *e, size_t n)
{
    for (size_t k = 1; k < n; k++) {
        if (e[k].head == e[k - 1].head && e[k].len == e[k - 1].len && memcmp(e[k].s, e[k - 1].s, e[k].len) == 0)
            return 0;
    }
    return 1;
}

static PyObject *
py_sorted_by_str_keys(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *items, *given;
    int want_rows = 0, packed = 0, index = 0;
    if (!PyArg_ParseTuple(args, "O!O!|ppp:sorted_by_str_keys", &PyList_Type, &items, &PyList_Type, &given, &want_rows,
                          &packed, &index))
        return NULL;
    if ((packed || index) && !want_rows) {
        PyErr_SetString(PyExc_ValueError, packed ? "packed needs rows" : "index needs rows");
        return NULL;
    }
    if (packed && index) {
        PyErr_SetString(PyExc_ValueError, "packed and index exclude each other");
        return NULL;
    }
    Py_ssize_t n = PyList_Size(items);
    if (n < 0) return NULL;
    if (PyList_Size(given) != n) {
        PyErr_SetString(PyExc_ValueError, "items and keys must have the same length");
        return NULL;
    }
    /* a private copy holds a strong reference to every key (and so its UTF-8 bytes) while
     * the GIL is released: no other thread can drop them */
    PyObject *keys = PyList_GetSlice(given, 0, n);
    if (keys == NULL) return NULL;
    PyObject *out = sorted_by_keys_copy(items, keys, n, packed ? 2 : index ? 3 : want_rows);
    Py_DECREF(keys);
    return out;
}

static PyObject *
sorted_by_keys_copy(PyObject *items, PyObject *keys, Py_ssize_t n, int want_rows)
{
    strkey_entry *e = mr_alloc_array(n ? (size_t)n : 1, sizeof(strkey_entry));
    if (e == NULL) return NULL;
    strkey_entry *tmp = mr_alloc_array(n ? (size_t)n : 1, sizeof(strkey_entry));
    if (tmp == NULL) {
        PyMem_Free(e);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *k = PyList_GetItem(keys, i);
        if (k == NULL) {
            PyMem_Free(e);
            PyMem_Free(tmp);
            return NULL;
        }
        Py_ssize_t len = 0;
        const char *s = PyUnicode_CheckExact(k) ? PyUnicode_AsUTF8AndSize(k, &len) : NULL;
        if (s == NULL) {
            PyErr_Clear();
            PyMem_Free(e);
            PyMem_Free(tmp);
            Py_RETURN_NONE;
        }
        strkey_set(e, tmp, (size_t)i, s, (size_t)len);
    }
    Py_BEGIN_ALLOW_THREADS
    strkey_sort(e, tmp, (size_t)n);
    Py_END_ALLOW_THREADS
    if (want_rows == 2) {
        /* the packed form: (rows as native int64 bytes, every key distinct); the items are not
         * read (nor a sorted list made) */
        PyObject *rows = strkey_rows_packed(e, n);
        PyObject *pair = rows == NULL ? NULL : PyTuple_Pack(2, rows, strkey_distinct(e, (size_t)n) ? Py_True : Py_False);
        Py_XDECREF(rows);
        PyMem_Free(e);
        PyMem_Free(tmp);
        return pair;
    }
    PyObject *out = PyList_New(n);
    if (out != NULL) {
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *item = PyList_GetItem(items, (Py_ssize_t)e[i].index); /* bounds-checked */
            if (item == NULL) {
                Py_CLEAR(out);
                break;
            }
            Py_INCREF(item);
            if (PyList_SetItem(out, i, item) < 0) {
                Py_CLEAR(out);
                break;
            }
        }
    }
    PyObject *rows = NULL;
    int distinct = want_rows == 3 ? strkey_distinct(e, (size_t)n) : 0; /* before strkey_rows reuses tmp */
    if (out != NULL && want_rows) {
        /* rows[i]: the position of items[i] in the sorted list */
        rows = strkey_rows(e, tmp, n, want_rows == 3);
        if (rows == NULL) Py_CLEAR(out);
    }
    PyMem_Free(e);
    PyMem_Free(tmp);
    if (out == NULL || !want_rows) return out;
    PyObject *pair = NULL;
    if (want_rows == 3) {
        /* the index form: (sorted items, (keys, rows) as tuples, every key distinct) */
        PyObject *ids = PyList_AsTuple(keys);
        PyObject *index = ids == NULL ? NULL : PyTuple_Pack(2, ids, rows);
        if (index != NULL) pair = PyTuple_Pack(3, out, index, distinct ? Py_True : Py_False);
        Py_XDECREF(ids);
        Py_XDECREF(index);
    }
    else pair = PyTuple_Pack(2, out, rows);
    Py_DECREF(out);
    Py_DECREF(rows);
    return pair;
}

/* A list of ngroups new tuples, tuple g sized count[g] (items set later); borrowed pointers
 * to the tuples go to slots[g]. */
static PyObject *
sg_group_tuples(const size_t *count, size_t ngroups, PyObject **slots)
{
    /* all out of the collector until filled (sorted_groups shows them, gctrack.h) */
    PyObject *out = mr_gc_hide(PyList_New((Py_ssize_t)ngroups));
    if (out == NULL) return NULL;
    for (size_t g = 0; g < ngroups; g++) {
        PyObject *tuple = mr_gc_hide(PyTuple_New((Py_ssize_t)count[g]));
        if (tuple == NULL || PyList_SetItem(out, (Py_ssize_t)g, tuple) < 0) {
            Py_DECREF(out);
            return NULL;
        }
        slots[g] = tuple;
    }
    return out;
}

/* sorted_groups(items, keys, group_of, ngroups, extra): the stable sort of items by their
 * str keys (as sorted_by_str_keys with rows) and, in that order, items and extra split by
 * group: (sorted items tuple, rows list, [tuple of group g's items], [tuple of group g's
 * extras]). None (nothing raised) when some key is not an exact str or has no UTF-8 encoding. */
/* ---- assembly_columns: the per-fragment columns of WeightPlacementManifest.from_fragments --
 * One pass in input order (the fragments' creation order, usually their order in memory)
 * instead of a handful of Python maps: per fragment its tensor position, its rank's group and
 * its id. Declines (None, no exception) on anything unusual; the caller then runs the Python
 * steps, which raise the contract's first error. */

enum { AC_TENSOR, AC_RANK, AC_ID, AC_N };

enum { AC_AHEAD = 16 }; /* fragments between a prefetch hint and the visit it is for */
static const char *const ac_names[AC_N] = {"tensor_id", "rank", "placement_fragment_id"};

typedef struct {
    PyObject *rank;  /* strong; NULL = empty */
    PyObject *group; /* strong */
} ac_slot;

PyDoc_STRVAR(assembly_columns_doc,
"assembly_columns(fragments, fragment_type, tensor_position, group_of_rank)\n"
"--\n\n"
"For fragments (a tuple, every item exactly fragment_type): (positions, groups, ids,\n"
"referenced): positions[i] = tensor_position[fragments[i].tensor_id] and groups[i] =\n"
"group_of_rank[fragments[i].rank] (the very int objects of the dicts; each distinct rank object\n"
"is looked up once, in order of first appearance), ids[i] = fragments[i].placement_fragment_id,\n"
"and referenced = the number of distinct positions. None when some fragment is not exactly\n"
"fragment_type, a read fails, a tensor id is not an exact str or not in tensor_position, a\n"
"rank is not in group_of_rank, or a position is not an int in range(len(tensor_position)).\n"
"Errors of the rank objects' own __hash__ / __eq__ propagate.");

static PyObject *
py_assembly_columns(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *fragments, *ftype, *positions_of, *groups_of;
    if (!PyArg_ParseTuple(args, "O!OOO!:assembly_columns", &PyTuple_Type, &fragments, &ftype, &positions_of,
                          &PyDict_Type, &groups_of))
        return NULL;
    if (!PyType_Check(ftype)) {
        PyErr_SetString(PyExc_TypeError, "assembly_columns: fragment_type must be a class");
        return NULL;
    }
    int pair = mr_str_is_pair(positions_of);
    if (!pair && !PyDict_Check(positions_of)) {
        PyErr_SetString(PyExc_TypeError, "assembly_columns: tensor_position must be a dict or an (ids, positions) pair");
        return NULL;
    }
    Py_ssize_t n = PyTuple_Size(fragments);
    Py_ssize_t ntensors = pair ? mr_str_pair_size(positions_of, -1) : PyDict_Size(positions_of);
    if (pair && ntensors < 0 && PyErr_ExceptionMatches(PyExc_ValueError)) {
        PyErr_Clear(); /* a malformed pair: declined, as a value out of range is */
        Py_RETURN_NONE;
    }
    if (n < 0 || ntensors < 0) return NULL;
    static PyObject *names[AC_N];
    for (int k = 0; k < AC_N; k++) {
        if (names[k] == NULL && (names[k] = PyUnicode_InternFromString(ac_names[k])) == NULL) return NULL;
    }
    size_t cap = 16;
    while (cap < (size_t)n * 2 && cap < ((size_t)1 << 20)) cap *= 2; /* distinct ranks: few */
    ac_slot *slots = PyMem_Calloc(cap, sizeof(ac_slot));
    unsigned char *seen = PyMem_Calloc(ntensors ? (size_t)ntensors : 1, 1);
    /* out of the collector until full: the reads below may run Python code (gctrack.h) */
    PyObject *positions = mr_gc_hide(PyList_New(n)), *groups = mr_gc_hide(PyList_New(n));
    PyObject *ids = mr_gc_hide(PyList_New(n)), *result = NULL;
    size_t used = 0;
    Py_ssize_t referenced = 0;
    int declined = 0;
    mr_str_memo last; /* the tensor ids' table by identity (str_index.h) */
    if (pair) mr_str_memo_init_pair(&last, positions_of, ntensors, ntensors);
    else mr_str_memo_init(&last, positions_of, ntensors, ntensors);
    if (slots == NULL || seen == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (positions == NULL || groups == NULL || ids == NULL) goto done;
    static mr_class_memo memo;
    mr_layout_class lc;
    int layout_ok = mr_pf_layout(&memo, &lc, ftype);
    for (Py_ssize_t i = 0; i < n && !declined; i++) {
        if (layout_ok) {
            mr_pf_prefetch_ahead(fragments, i, n, &lc, AC_AHEAD);
            PyObject *near = i + AC_AHEAD < n ? PyTuple_GetItem(fragments, i + AC_AHEAD) : NULL;
            PyObject *const *nf = near != NULL ? mr_layout_fields(near, &lc) : NULL;
            if (nf != NULL && nf[MR_PF_TENSOR_ID] != NULL) mr_str_memo_prefetch(&last, nf[MR_PF_TENSOR_ID]);
        }
        PyObject *fragment = PyTuple_GetItem(fragments, i); /* borrowed: the tuple holds it */
        if (fragment == NULL) goto done;
        if ((PyObject *)Py_TYPE(fragment) != ftype) {
            declined = 1;
            break;
        }
        PyObject *v[AC_N] = {NULL, NULL, NULL};
        /* an accepted C-owned layout (PlacementFragment): the fields loaded from the object
         * (an empty one is read as an attribute below, as a missing key was); otherwise the
         * fields from one scan of the state dict (an exact fragment_type instance: what
         * the attribute reads return, without hashing or Python code); a field the scan does
         * not meet (missing, or under a key that is not the interned name) and every field of
         * a state holding a key that is not an exact str are read as attributes */
        PyObject *const *lf = layout_ok ? mr_layout_fields(fragment, &lc) : NULL;
        if (lf == NULL) mr_str_memo_code(&last); /* the reads below may run Python code */
        PyObject *state = lf != NULL ? NULL : PyObject_GenericGetDict(fragment, NULL);
        if (lf != NULL) {
            v[AC_TENSOR] = lf[MR_PF_TENSOR_ID];
            v[AC_RANK] = lf[MR_PF_RANK];
            v[AC_ID] = lf[MR_PF_PLACEMENT_FRAGMENT_ID];
        }
        else if (state == NULL || !PyDict_Check(state) || cj_scan_names(state, names, AC_N, v) < 0) {
            PyErr_Clear();
            for (int k = 0; k < AC_N; k++) v[k] = NULL;
        }
        for (int k = 0; k < AC_N; k++) Py_XINCREF(v[k]);
        Py_XDECREF(state);
        for (int k = 0; k < AC_N; k++) {
            if (v[k] == NULL) v[k] = PyObject_GetAttr(fragment, names[k]);
            if (v[k] == NULL) {
                PyErr_Clear();
                declined = 1;
                break;
            }
        }
        PyObject *position = NULL, *group = NULL;
        if (!declined && !PyUnicode_CheckExact(v[AC_TENSOR])) declined = 1;
        int64_t known = -1;
        if (!declined && (position = mr_str_memo_get(&last, v[AC_TENSOR], &known)) != NULL) {
            Py_INCREF(position); /* what the lookup gives: the dict's value, known in range */
            if (!seen[known]) {
                seen[known] = 1;
                referenced++;
            }
        }
        else if (!declined) {
            /* an exact str key: a key of the dict that is not an exact str may run its __eq__ */
            PyObject *index = mr_str_memo_dict(&last);
            if (index == NULL) {
                for (int k = 0; k < AC_N; k++) Py_XDECREF(v[k]);
                goto done;
            }
            position = PyDict_GetItemWithError(index, v[AC_TENSOR]);
            mr_str_memo_missed(&last);
            if (position == NULL) {
                if (PyErr_Occurred()) PyErr_Clear();
                declined = 1;
            }
            else {
                Py_INCREF(position); /* the rank lookup below may run Python code */
                Py_ssize_t at = PyLong_CheckExact(position) ? PyLong_AsSsize_t(position) : -1;
                if (at == -1 && PyErr_Occurred()) PyErr_Clear();
                if (at < 0 || at >= ntensors) declined = 1;
                else if (!seen[at]) {
                    seen[at] = 1;
                    referenced++;
                }
            }
        }
        if (!declined) {
            PyObject *rank = v[AC_RANK];
            uint64_t x = (uint64_t)(uintptr_t)rank;
            x ^= x >> 33;
            x *= 0xFF51AFD7ED558CCDULL;
            x ^= x >> 33;
            size_t mask = cap - 1, j = (size_t)x & mask;
            while (slots[j].rank != NULL && slots[j].rank != rank) j = (j + 1) & mask;
            if (slots[j].rank == rank) group = slots[j].group;
            else if ((used + 1) * 2 > cap) declined = 1; /* too many distinct rank objects */
            else {
                /* the rank's own __hash__ / __eq__ may run: the fragments tuple and this call's
                 * references keep everything read so far alive */
                mr_str_memo_code(&last);
                group = PyDict_GetItemWithError(groups_of, rank);
                if (group == NULL) {
                    if (PyErr_Occurred()) {
                        for (int k = 0; k < AC_N; k++) Py_XDECREF(v[k]);
                        Py_XDECREF(position);
                        goto done;
                    }
                    declined = 1;
                }
                else if (!PyLong_CheckExact(group)) declined = 1;
                else {
                    /* the lookup may have run Python code: probe again before storing */
                    j = (size_t)x & mask;
                    while (slots[j].rank != NULL && slots[j].rank != rank) j = (j + 1) & mask;
                    if (slots[j].rank == NULL) {
                        slots[j].rank = Py_NewRef(rank);
                        slots[j].group = Py_NewRef(group);
                        used++;
                    }
                    group = slots[j].group;
                }
            }
        }
        if (!declined) {
            PyList_SetItem(positions, i, position); /* steal; index in range */
            position = NULL;
            PyList_SetItem(groups, i, Py_NewRef(group));
            PyList_SetItem(ids, i, v[AC_ID]);
            v[AC_ID] = NULL;
        }
        Py_XDECREF(position);
        for (int k = 0; k < AC_N; k++) Py_XDECREF(v[k]);
    }
    if (declined) result = Py_NewRef(Py_None);
    else {
        mr_gc_show(positions); /* full */
        mr_gc_show(groups);
        mr_gc_show(ids);
        result = Py_BuildValue("(OOOn)", positions, groups, ids, referenced);
    }
done:
    if (slots != NULL) {
        for (size_t j = 0; j < cap; j++) {
            Py_XDECREF(slots[j].rank);
            Py_XDECREF(slots[j].group);
        }
    }
    PyMem_Free(slots);
    PyMem_Free(seen);
    mr_str_memo_clear(&last);
    Py_XDECREF(positions);
    Py_XDECREF(groups);
    Py_XDECREF(ids);
    return result;
}

/* ---- tensor_shape_groups: weight/_coverage.py's tensor classes, the per-tensor pass ------
 * _validate_with_table keys each tensor by (global_shape, ids of its axis objects) and maps a
 * new key to its equality class. This pass groups the tensors by that same key in C (shape
 * values, axis object identities), numbered in order of first appearance: Python then keys
 * only each group's first tensor, which meets the keys (and runs the equality-class lookups) in
 * the same order as the per-tensor loop. It reads exact instances only (their own state dict,
 * matched by identity to interned names) and hashes plain C values: no Python code runs. */

typedef struct {
    PyObject *shape; /* strong: the group's first shape tuple (NULL = empty slot) */
    PyObject *axes;  /* strong: the group's axes tuple (its items' addresses are not reused) */
    size_t group;
} tsg_slot;

/* The ints of an exact tuple of exact ints fitting int64 into v[0:n] (n <= cap), as *n; -1 else. */
static int
tsg_shape(PyObject *shape, int64_t *v, Py_ssize_t cap, Py_ssize_t *n)
{
    if (!PyTuple_CheckExact(shape)) return -1;
    Py_ssize_t d = PyTuple_Size(shape);
    if (d < 0 || d > cap) return -1;
    for (Py_ssize_t k = 0; k < d; k++) {
        PyObject *item = PyTuple_GetItem(shape, k);
        if (item == NULL || !PyLong_CheckExact(item)) return -1;
        int overflow = 0;
        long long x = PyLong_AsLongLongAndOverflow(item, &overflow);
        if (overflow || (x == -1 && PyErr_Occurred())) return -1;
        v[k] = (int64_t)x;
    }
    *n = d;
    return 0;
}

enum { TSG_MAX_DIMS = 32 };

PyDoc_STRVAR(tensor_shape_groups_doc,
"tensor_shape_groups(tensors, tensor_type)\n"
"--\n\n"
"For tensors (a tuple, every item exactly tensor_type, its global_shape an exact tuple of at\n"
"most 32 exact ints fitting 64 bits, its parallel_axes an exact tuple of at most 32): (of, firsts)\n"
"with of[i] the group of tensors[i], one per distinct (shape values, axis objects in order),\n"
"numbered in order of first appearance, and firsts[g] the position of group g's first tensor.\n"
"None (nothing raised) when a tensor is not like that. Runs no Python code.");

/* The arguments (tensors, tensor_type) of a per-tensor pass (format "O!O:<name>"), and the two
 * state names it reads interned into names (once per process): the tensors' length, or -1 with
 * an exception. */
static Py_ssize_t
tensor_pass_args(PyObject *args, const char *format, PyObject **tensors, PyObject **ttype, PyObject **names,
                 const char *const *spelled)
{
    if (!PyArg_ParseTuple(args, format, &PyTuple_Type, tensors, ttype)) return -1;
    if (!PyType_Check(*ttype)) {
        PyErr_Format(PyExc_TypeError, "%s: tensor_type must be a class", strchr(format, ':') + 1);
        return -1;
    }
    for (int k = 0; k < 2; k++) {
        if (names[k] == NULL && (names[k] = PyUnicode_InternFromString(spelled[k])) == NULL) return -1;
    }
    return PyTuple_Size(*tensors);
}

static PyObject *
py_tensor_shape_groups(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *tensors, *ttype;
    static PyObject *names[2];
    static const char *const tsg_names[2] = {"global_shape", "parallel_axes"};
    Py_ssize_t n = tensor_pass_args(args, "O!O:tensor_shape_groups", &tensors, &ttype, names, tsg_names);
    if (n < 0) return NULL;
    size_t un = (size_t)n, cap = 16;
    while (cap < 2 * un) {
        if (cap > ((size_t)PY_SSIZE_T_MAX) / (4 * sizeof(tsg_slot))) {
            PyErr_NoMemory();
            return NULL;
        }
        cap *= 2;
    }
    tsg_slot *slots = PyMem_Calloc(cap, sizeof(tsg_slot));
    size_t *of = mr_alloc_array(un ? un : 1, sizeof(size_t));
    size_t *firsts = mr_alloc_array(un ? un : 1, sizeof(size_t));
    PyObject *result = NULL;
    size_t ngroups = 0;
    int declined = 0;
    if (slots == NULL || of == NULL || firsts == NULL) {
        if (!PyErr_Occurred()) PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n && !declined; i++) {
        PyObject *tensor = PyTuple_GetItem(tensors, i); /* borrowed: the tuple holds it */
        if (tensor == NULL) goto done;
        if ((PyObject *)Py_TYPE(tensor) != ttype) {
            declined = 1;
            break;
        }
        PyObject *state = PyObject_GenericGetDict(tensor, NULL);
        PyObject *v[2] = {NULL, NULL};
        if (state == NULL || !PyDict_Check(state) || cj_scan_names(state, names, 2, v) < 0 || v[0] == NULL ||
            v[1] == NULL || !PyTuple_CheckExact(v[1])) {
            PyErr_Clear();
            Py_XDECREF(state);
            declined = 1;
            break;
        }
        /* v borrowed from the state, which the tensor holds; nothing below runs Python code */
        int64_t dims[TSG_MAX_DIMS];
        Py_ssize_t d = 0;
        if (tsg_shape(v[0], dims, TSG_MAX_DIMS, &d) < 0) {
            PyErr_Clear();
            Py_DECREF(state);
            declined = 1;
            break;
        }
        Py_ssize_t na = PyTuple_Size(v[1]);
        if (na < 0 || na > TSG_MAX_DIMS) {
            PyErr_Clear();
            Py_DECREF(state);
            declined = 1;
            break;
        }
        PyObject *axes[TSG_MAX_DIMS];
        uint64_t h = ((uint64_t)d << 56) ^ ((uint64_t)na << 48);
        for (Py_ssize_t k = 0; k < na; k++) {
            axes[k] = PyTuple_GetItem(v[1], k);
            h = (h ^ ((uint64_t)(uintptr_t)axes[k] >> 4)) * 0x9E3779B97F4A7C15ULL;
        }
        for (Py_ssize_t k = 0; k < d; k++) h = (h ^ (uint64_t)dims[k]) * 0x9E3779B97F4A7C15ULL + (uint64_t)k;
        h ^= h >> 29;
        size_t mask = cap - 1, j = (size_t)(h * 0xFF51AFD7ED558CCDULL >> 17) & mask;
        for (;; j = (j + 1) & mask) {
            tsg_slot *slot = &slots[j];
            if (slot->shape == NULL) {
                /* a new group (cap >= 2 n: a free slot always exists) */
                slot->shape = Py_NewRef(v[0]);
                slot->axes = Py_NewRef(v[1]);
                slot->group = ngroups;
                firsts[ngroups] = (size_t)i;
                of[i] = ngroups++;
                break;
            }
            /* the same axis objects in the same order (the group's axes tuple holds its items,
             * so their addresses are not reused while this runs) */
            Py_ssize_t ona = PyTuple_Size(slot->axes);
            int same_axes = ona == na;
            for (Py_ssize_t k = 0; same_axes && k < na; k++) same_axes = PyTuple_GetItem(slot->axes, k) == axes[k];
            if (!same_axes) continue;
            int64_t other[TSG_MAX_DIMS];
            Py_ssize_t od = 0;
            int same = slot->shape == v[0];
            if (!same && tsg_shape(slot->shape, other, TSG_MAX_DIMS, &od) == 0 && od == d)
                same = d == 0 || memcmp(other, dims, (size_t)d * sizeof(int64_t)) == 0;
            if (same) {
                of[i] = slot->group;
                break;
            }
        }
        Py_DECREF(state);
    }
    if (declined) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    /* (out of the collector until full: the second allocation may collect, gctrack.h) */
    PyObject *of_list = mr_gc_hide(PyList_New(n)), *firsts_list = mr_gc_hide(PyList_New((Py_ssize_t)ngroups));
    int bad = of_list == NULL || firsts_list == NULL;
    for (size_t i = 0; !bad && i < un; i++) {
        PyObject *x = PyLong_FromSize_t(of[i]);
        if (x == NULL) bad = 1;
        else PyList_SetItem(of_list, (Py_ssize_t)i, x); /* steals; index in range */
    }
    for (size_t g = 0; !bad && g < ngroups; g++) {
        PyObject *x = PyLong_FromSize_t(firsts[g]);
        if (x == NULL) bad = 1;
        else PyList_SetItem(firsts_list, (Py_ssize_t)g, x);
    }
    if (!bad) {
        mr_gc_show(of_list);
        mr_gc_show(firsts_list);
        result = PyTuple_Pack(2, of_list, firsts_list);
    }
    Py_XDECREF(of_list);
    Py_XDECREF(firsts_list);
done:
    if (slots != NULL) {
        for (size_t j = 0; j < cap; j++) {
            Py_XDECREF(slots[j].shape);
            Py_XDECREF(slots[j].axes);
        }
    }
    PyMem_Free(slots);
    PyMem_Free(of);
    PyMem_Free(firsts);
    return result;
}

/* ---- tensor_shape_columns: the sorted catalog's shapes and itemsizes for the fragment table --
 * validation._pack read [t.global_shape for t in tensors] and [t.itemsize for t in tensors] by
 * two Python maps over the id-sorted catalog, whose objects lie scattered in memory (at 10^6
 * fragments each read of a descriptor and of its state missed, twice per descriptor). One pass
 * in batches (as td_sink_tensors: each batch's objects asked for one batch ahead, the states got
 * and touched before they are scanned) reads both from each exact instance's state dict. */

PyDoc_STRVAR(tensor_shape_columns_doc,
"tensor_shape_columns(tensors, tensor_type)\n"
"--\n\n"
"For tensors (a tuple, every item exactly tensor_type with global_shape and itemsize in its\n"
"state dict under exact str keys): (shapes, itemsizes), the lists [t.global_shape for t in\n"
"tensors] and [t.itemsize for t in tensors] (the states' own objects). None (nothing raised)\n"
"when a tensor is not like that. Runs no Python code.");

static PyObject *
py_tensor_shape_columns(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *tensors, *ttype;
    static PyObject *names[2];
    static const char *const tsc_names[2] = {"global_shape", "itemsize"};
    Py_ssize_t n = tensor_pass_args(args, "O!O:tensor_shape_columns", &tensors, &ttype, names, tsc_names);
    if (n < 0) return NULL;
    /* out of the collector until full (gctrack.h) */
    PyObject *shapes = mr_gc_hide(PyList_New(n)), *itemsizes = mr_gc_hide(PyList_New(n)), *result = NULL;
    if (shapes == NULL || itemsizes == NULL) goto done;
    int declined = 0;
    PyObject *states[PFL_BATCH];
    for (Py_ssize_t i0 = 0; i0 < n && !declined; i0 += PFL_BATCH) {
        size_t nb = (size_t)(n - i0 < PFL_BATCH ? n - i0 : PFL_BATCH), nstates;
        /* the next batch's objects: a hint only */
        for (Py_ssize_t k = i0 + PFL_BATCH; k < i0 + 2 * PFL_BATCH && k < n; k++) {
            PyObject *next = PyTuple_GetItem(tensors, k); /* in range */
            if (next != NULL) pfl_prefetch(next, 0);
        }
        PyObject *objs[PFL_BATCH];
        for (size_t j = 0; j < nb; j++) objs[j] = PyTuple_GetItem(tensors, i0 + (Py_ssize_t)j); /* in range */
        declined = batch_states(objs, nb, ttype, states, &nstates) < 0;
        for (size_t j = 0; !declined && j < nb; j++) {
            PyObject *v[2];
            if (cj_scan_names(states[j], names, 2, v) < 0 || v[0] == NULL || v[1] == NULL) {
                declined = 1;
                break;
            }
            /* steal the new references; indexes in range */
            PyList_SetItem(shapes, i0 + (Py_ssize_t)j, Py_NewRef(v[0]));
            PyList_SetItem(itemsizes, i0 + (Py_ssize_t)j, Py_NewRef(v[1]));
        }
        for (size_t j = 0; j < nstates; j++) Py_DECREF(states[j]);
    }
    if (declined) {
        PyErr_Clear();
        result = Py_NewRef(Py_None);
    }
    else {
        mr_gc_show(shapes);
        mr_gc_show(itemsizes);
        result = PyTuple_Pack(2, shapes, itemsizes);
    }
done:
    Py_XDECREF(shapes);
    Py_XDECREF(itemsizes);
    return result;
}

/* The distinct form's extras: a list of ngroups tuples, tuple g holding sorted(set(the extras
 * of the items of group g)) as new ints, from group[0:n] (each item's group) and count (items
 * per group); with a catalog (an exact tuple, or NULL) catalog[v] for each such v instead (what
 * the caller would map them to: no int object each, and the catalog's objects, scattered in
 * memory, asked for ahead). Py_None (a new reference, nothing raised) when some extra is not an
 * exact int in range(2**31) (or, with a catalog, not below its length): the caller declines;
 * NULL with an exception. */
#define SG_CATALOG_AHEAD 8 /* values between asking for catalog[v]'s object and taking it */

static PyObject *
sg_distinct(PyObject *extra, const size_t *group, size_t n, const size_t *count, size_t ngroups, PyObject *catalog)
{
    PyObject *out = NULL;
    size_t *value = mr_alloc_array(n ? n : 1, sizeof(size_t));
    size_t *start = mr_alloc_array(ngroups + 1, sizeof(size_t));
    size_t *fill = mr_alloc_array(ngroups ? ngroups : 1, sizeof(size_t));
    size_t *bygroup = mr_alloc_array(n ? n : 1, sizeof(size_t));
    mr_kv *kv = mr_alloc_array(n ? n : 1, sizeof(mr_kv));
    uint32_t *stamp = NULL;
    size_t top = 0;
    if (value == NULL || start == NULL || fill == NULL || bygroup == NULL || kv == NULL) goto done;
    for (size_t i = 0; i < n; i++) {
        PyObject *x = PyList_GetItem(extra, (Py_ssize_t)i);
        if (x == NULL) goto done;
        Py_ssize_t v = PyLong_CheckExact(x) ? PyLong_AsSsize_t(x) : -1;
        if (v == -1 && PyErr_Occurred()) PyErr_Clear();
        if (v < 0 || v >= ((Py_ssize_t)1 << 31)) {
            out = Py_NewRef(Py_None);
            goto done;
        }
        value[i] = (size_t)v;
        if ((size_t)v >= top) top = (size_t)v + 1;
    }
    if (catalog != NULL && top > (size_t)PyTuple_Size(catalog)) {
        out = Py_NewRef(Py_None);
        goto done;
    }
    if (ngroups > (size_t)UINT32_MAX - 1) {
        out = Py_NewRef(Py_None);
        goto done;
    }
    /* values in a range not much wider than their count: a stamp per value skips most repeats
     * (only a shortcut: the sort below drops every repeat) */
    if (top <= 2 * n + 1024) {
        stamp = mr_alloc_array(top ? top : 1, sizeof(uint32_t));
        if (stamp == NULL) goto done;
        memset(stamp, 0, (top ? top : 1) * sizeof(uint32_t));
    }
    start[0] = 0;
    for (size_t g = 0; g < ngroups; g++) start[g + 1] = start[g] + count[g];
    memcpy(fill, start, ngroups * sizeof(size_t));
    /* each group's values, most repeats skipped (stamp[v] = 1 + the last group to take v) */
    for (size_t i = 0; i < n; i++) {
        size_t g = group[i], v = value[i];
        if (stamp == NULL || stamp[v] != (uint32_t)(g + 1)) {
            if (stamp != NULL) stamp[v] = (uint32_t)(g + 1);
            bygroup[fill[g]++] = v;
        }
    }
    /* a value met again in its group after another group's took it is pushed twice: the sort
     * below brings the copies together and they are dropped */
    out = mr_gc_hide(PyList_New((Py_ssize_t)ngroups)); /* until full (gctrack.h) */
    for (size_t g = 0; out != NULL && g < ngroups; g++) {
        size_t *vs = bygroup + start[g], m = fill[g] - start[g], k = 0;
        /* one radix sort of the values (below 2**31: at most four digit passes) */
        for (size_t p = 0; p < m; p++) {
            kv[p].key = (uint64_t)vs[p];
            kv[p].idx = 0;
        }
        if (mr_radix_sort(kv, m) < 0) {
            PyErr_NoMemory();
            Py_CLEAR(out);
            break;
        }
        for (size_t p = 0; p < m; p++) vs[p] = (size_t)kv[p].key;
        for (size_t p = 0; p < m; p++)
            if (p == 0 || vs[p] != vs[p - 1]) vs[k++] = vs[p];
        PyObject *tuple = PyTuple_New((Py_ssize_t)k);
        if (tuple == NULL || PyList_SetItem(out, (Py_ssize_t)g, tuple) < 0) {
            Py_CLEAR(out);
            break;
        }
        if (catalog != NULL) {
            /* no allocation from here to the tuple's end: nothing sees it part-filled. Each
             * object is judged inert (common.h) as it is taken: a tuple of inert objects only
             * is untracked, as sorted_groups does for its groups' items (and the collector, or
             * untrack_inert of the part holding it, would after visiting each one again) */
            int inert = 1;
            for (size_t p = 0; out != NULL && p < k; p++) {
                if (p + SG_CATALOG_AHEAD < k) { /* hints: its header and collector header */
                    const char *next = (const char *)PyTuple_GetItem(catalog, (Py_ssize_t)vs[p + SG_CATALOG_AHEAD]);
                    if (next != NULL) {
                        __builtin_prefetch(next, 1);
                        __builtin_prefetch(next - 16);
                    }
                }
                PyObject *v = PyTuple_GetItem(catalog, (Py_ssize_t)vs[p]); /* borrowed; the args hold it */
                if (v != NULL && inert && !mr_gc_inert(v, 0)) inert = 0;
                if (v == NULL || PyTuple_SetItem(tuple, (Py_ssize_t)p, Py_NewRef(v)) < 0) /* steals it */
                    Py_CLEAR(out);
            }
            if (out != NULL && inert) mr_gc_hide(tuple); /* full: out of the collector for good */
            continue;
        }
        for (size_t p = 0; p < k; p++) {
            PyObject *v = PyLong_FromSize_t(vs[p]);
            if (v == NULL || PyTuple_SetItem(tuple, (Py_ssize_t)p, v) < 0) { /* steals v */
                Py_CLEAR(out);
                break;
            }
        }
    }
    mr_gc_show(out); /* full (or NULL) */
done:
    PyMem_Free(value);
    PyMem_Free(start);
    PyMem_Free(fill);
    PyMem_Free(bygroup);
    PyMem_Free(kv);
    PyMem_Free(stamp);
    return out;
}

/* An input item of sorted_groups, its extra (NULL in the distinct form) and its group. */
typedef struct {
    PyObject *item;
    PyObject *extra;
    size_t group;
} sg_row;

#define SG_AHEAD 16 /* rows between a prefetch of an item's row and its use */

/* Hints for the input-order visits (borrowed pointers, never dereferenced here; NULL ignored): a
 * str key's header and first bytes (PyUnicode_AsUTF8AndSize and strkey_set read both), an item's
 * collector header and object header (mr_gc_inert and the references taken read both). */
static inline void
sg_prefetch_key(const PyObject *key)
{
    if (key == NULL) return;
    __builtin_prefetch(key);
    __builtin_prefetch((const char *)key + 63);
}

static inline void
sg_prefetch_item(const PyObject *item)
{
    if (item == NULL) return;
    __builtin_prefetch((const char *)item - 16);
    __builtin_prefetch(item, 1);
}

static PyObject *
py_sorted_groups(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *items, *given, *group_arg, *extra, *catalog = Py_None;
    Py_ssize_t ngroups_arg;
    int distinct = 0, packed = 0;
    if (!PyArg_ParseTuple(args, "OO!O!nO!|ppO:sorted_groups", &items, &PyList_Type, &given, &PyList_Type, &group_arg,
                          &ngroups_arg, &PyList_Type, &extra, &distinct, &packed, &catalog))
        return NULL;
    /* items: a list, or an exact tuple (read in place: no copy of a placement's fragments,
     * whose references a list would take and drop one by one over the scattered objects) */
    const int items_list = PyList_Check(items);
    if (!items_list && !PyTuple_CheckExact(items)) {
        PyErr_SetString(PyExc_TypeError, "sorted_groups: items must be a list or a tuple");
        return NULL;
    }
    if (catalog != Py_None && (!distinct || !PyTuple_CheckExact(catalog))) {
        PyErr_SetString(PyExc_TypeError, "catalog must be None or, with distinct, a tuple");
        return NULL;
    }
    Py_ssize_t n = items_list ? PyList_Size(items) : PyTuple_Size(items);
    if (n < 0) return NULL;
    if (PyList_Size(given) != n || PyList_Size(group_arg) != n || PyList_Size(extra) != n) {
        PyErr_SetString(PyExc_ValueError, "items, keys, group_of and extra must have the same length");
        return NULL;
    }
    if (ngroups_arg < 0) {
        PyErr_SetString(PyExc_ValueError, "ngroups must be non-negative");
        return NULL;
    }
    size_t ngroups = (size_t)ngroups_arg, un = (size_t)n;
    PyObject *result = NULL, *ordered = NULL, *rows = NULL, *groups = NULL, *extras = NULL;
    PyObject **gslots = NULL, **xslots = NULL, **held = NULL; /* held: n_held keys (strong) */
    Py_ssize_t n_held = 0;
    sg_row *rowv = NULL;
    unsigned char *ginert = NULL;
    int every_inert = 1;
    size_t *group = mr_alloc_array(un ? un : 1, sizeof(size_t));
    size_t *count = mr_alloc_array(ngroups ? ngroups : 1, sizeof(size_t));
    size_t *cursor = mr_alloc_array(ngroups ? ngroups : 1, sizeof(size_t));
    strkey_entry *e = mr_alloc_array(un ? un : 1, sizeof(strkey_entry));
    strkey_entry *tmp = mr_alloc_array(un ? un : 1, sizeof(strkey_entry));
    if (group == NULL || count == NULL || cursor == NULL || e == NULL || tmp == NULL) goto done;
    memset(count, 0, (ngroups ? ngroups : 1) * sizeof(size_t));
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *g = PyList_GetItem(group_arg, i);
        if (g == NULL) goto done;
        Py_ssize_t v = PyLong_CheckExact(g) ? PyLong_AsSsize_t(g) : -1;
        if (v == -1 && PyErr_Occurred()) PyErr_Clear();
        if (v < 0 || (size_t)v >= ngroups) {
            PyErr_SetString(PyExc_ValueError, "group_of must hold ints in range(ngroups)");
            goto done;
        }
        group[i] = (size_t)v;
        count[v]++;
    }
    /* a strong reference to every key (and so its UTF-8 bytes) while the GIL is released,
     * taken as the key is read (no Python code runs in this loop: the list is as it was) */
    held = mr_alloc_array(un ? un : 1, sizeof(PyObject *));
    if (held == NULL) goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        /* the key SG_AHEAD on: its header and first bytes (a hint; the list holds it) */
        if (i + SG_AHEAD < n) sg_prefetch_key(PyList_GetItem(given, i + SG_AHEAD));
        PyObject *k = PyList_GetItem(given, i);
        if (k == NULL) goto done;
        held[n_held++] = Py_NewRef(k);
        Py_ssize_t len = 0;
        const char *s = PyUnicode_CheckExact(k) ? PyUnicode_AsUTF8AndSize(k, &len) : NULL;
        if (s == NULL) {
            PyErr_Clear();
            result = Py_None;
            Py_INCREF(result);
            goto done;
        }
        strkey_set(e, tmp, (size_t)i, s, (size_t)len);
    }
    Py_BEGIN_ALLOW_THREADS
    strkey_sort(e, tmp, un);
    Py_END_ALLOW_THREADS
    /* every container first (allocations may run the collector, hence finalizers); then the
     * item pointers, and the references the containers take over, taken in input order
     * (objects in sequence in memory) rather than in the scattered sorted order */
    ordered = mr_gc_hide(PyTuple_New(n)); /* (every container out of the collector until full: gctrack.h) */
    rows = ordered == NULL ? NULL : packed ? strkey_rows_packed(e, n) : strkey_rows(e, tmp, n, 0);
    if (ordered == NULL || rows == NULL) goto done;
    gslots = mr_alloc_array(ngroups ? ngroups : 1, sizeof(PyObject *));
    xslots = mr_alloc_array(ngroups ? ngroups : 1, sizeof(PyObject *));
    rowv = mr_alloc_array(un ? un : 1, sizeof(sg_row));
    if (gslots == NULL || xslots == NULL || rowv == NULL) goto done;
    groups = sg_group_tuples(count, ngroups, gslots);
    if (groups == NULL) goto done;
    if (distinct) {
        /* each group's distinct extras, ascending, instead of its extras (before the judging
         * below: this allocates) */
        extras = sg_distinct(extra, group, un, count, ngroups, catalog == Py_None ? NULL : catalog);
        if (extras == NULL) goto done;
        if (extras == Py_None) {
            result = extras;
            extras = NULL;
            goto done;
        }
    }
    else {
        extras = sg_group_tuples(count, ngroups, xslots);
        if (extras == NULL) goto done;
    }
    /* which groups hold only inert items (common.h: no collector support, or an untracked
     * object that is not a dict; at depth 0 a tracked tuple is not): their tuples, and the
     * sorted tuple when every item is, are untracked after the fill, as the collector would at
     * its next pass (and as untrack_inert of the part or placement holding them would, after
     * visiting every item again in sorted order). Read here, in input order. */
    ginert = mr_alloc_array(ngroups ? ngroups : 1, 1);
    if (ginert == NULL) goto done;
    memset(ginert, 1, ngroups ? ngroups : 1);
    /* no Python code runs from here to the end of the fill: each item is judged and the two
     * references the containers take over are taken in the same visit (one pass over the
     * scattered objects, the one SG_AHEAD on asked for now) */
    for (Py_ssize_t i = 0; i < n; i++) {
        if (i + SG_AHEAD < n)
            sg_prefetch_item(items_list ? PyList_GetItem(items, i + SG_AHEAD) : PyTuple_GetItem(items, i + SG_AHEAD));
        sg_row *row = &rowv[i];
        row->item = items_list ? PyList_GetItem(items, i) : PyTuple_GetItem(items, i);
        row->extra = distinct ? NULL : PyList_GetItem(extra, i);
        row->group = group[i];
        if (row->item == NULL || (!distinct && row->extra == NULL)) {
            for (Py_ssize_t taken = 0; taken < i; taken++) {
                Py_DECREF(rowv[taken].item);
                Py_DECREF(rowv[taken].item);
                Py_XDECREF(rowv[taken].extra);
            }
            goto done;
        }
        if (!mr_gc_inert(row->item, 0)) {
            ginert[row->group] = 0;
            every_inert = 0;
        }
        Py_INCREF(row->item);
        Py_INCREF(row->item);
        Py_XINCREF(row->extra);
    }
    for (size_t g = 0; g < ngroups; g++) cursor[g] = 0;
    for (size_t k = 0; k < un; k++) {
        /* the rows come in sorted order, scattered over rowv: the one SG_AHEAD on is asked
         * for now (a hint) */
        if (k + SG_AHEAD < un) __builtin_prefetch(&rowv[e[k + SG_AHEAD].index]);
        const sg_row *row = &rowv[e[k].index];
        size_t g = row->group, c = cursor[g]++;
        /* cannot fail: fresh tuples owned by this call, positions in range; each call takes
         * over (or on failure releases) one of the references taken above */
        int bad = PyTuple_SetItem(ordered, (Py_ssize_t)k, row->item) < 0;
        bad |= PyTuple_SetItem(gslots[g], (Py_ssize_t)c, row->item) < 0;
        if (row->extra != NULL) bad |= PyTuple_SetItem(xslots[g], (Py_ssize_t)c, row->extra) < 0;
        if (bad) {
            for (size_t rest = k + 1; rest < un; rest++) {
                const sg_row *r = &rowv[e[rest].index];
                Py_DECREF(r->item);
                Py_DECREF(r->item);
                Py_XDECREF(r->extra);
            }
            goto done;
        }
    }
    /* no Python code has run since the items were judged: they are still untracked. The
     * containers, made untracked, are tracked now that they are full, except the tuples of
     * inert items only (as the collector would leave them) */
    if (!every_inert) mr_gc_show(ordered);
    for (size_t g = 0; g < ngroups; g++) {
        if (!ginert[g]) mr_gc_show(gslots[g]);
        if (!distinct) mr_gc_show(xslots[g]);
    }
    mr_gc_show(groups);
    mr_gc_show(extras);
    result = PyTuple_Pack(4, ordered, rows, groups, extras);
done:
    PyMem_Free(ginert);
    for (Py_ssize_t k = 0; k < n_held; k++) Py_DECREF(held[k]);
    PyMem_Free(held);
    Py_XDECREF(ordered);
    Py_XDECREF(rows);
    Py_XDECREF(groups);
    Py_XDECREF(extras);
    PyMem_Free(group);
    PyMem_Free(count);
    PyMem_Free(cursor);
    PyMem_Free(gslots);
    PyMem_Free(xslots);
    PyMem_Free(rowv);
    PyMem_Free(e);
    PyMem_Free(tmp);
    return result;
}

/* With the automatic collector off: the pass's rank memo (pfl_rank) holds a rank's text for the
 * whole call, and the first read of a rank whose attributes are still inline makes its dict, an
 * allocation that could otherwise run gc callbacks (Python code that could change a rank already
 * encoded; tests/test_lead29_collector_memos.py). */
MR_COLLECTOR_PAUSED_KW(py_canonical_parts_json)

static PyMethodDef canonical_methods[] = {
    {"sha256_hex", (PyCFunction)py_sha256_hex, METH_O, "Lowercase hex SHA-256 of bytes."},
    {"canonical_json", (PyCFunction)(void (*)(void))py_canonical_json, METH_VARARGS | METH_KEYWORDS,
     "json.dumps(obj, sort_keys=True, separators=(',', ':'), ensure_ascii=...) for JSON trees."},
    {"canonical_sha256", (PyCFunction)(void (*)(void))py_canonical_sha256, METH_VARARGS | METH_KEYWORDS,
     "Lowercase hex SHA-256 of the UTF-8 canonical JSON of obj."},
    {"canonical_parts_json", (PyCFunction)(void (*)(void))py_canonical_parts_json_paused, METH_VARARGS | METH_KEYWORDS,
     "prefix + canonical JSON of the parts list from (fragments, rest-of-part JSON) pairs + suffix "
     "(or its hex SHA-256); fragments and ranks read in list order. types=(tensor, split, replicated, "
     "ownership, fragment, rank) classes: batched when every value is of them. With tensors=: + their canonical "
     "JSON list + after, or None when a value is not of those classes (nothing raised)."},
    {"canonical_fragments_json", (PyCFunction)py_canonical_fragments_json, METH_O,
     "canonical_json([fragment_object(f) for f in fragments]) without the intermediate dicts."},
    {"canonical_tensors_json", (PyCFunction)py_canonical_tensors_json, METH_VARARGS,
     "canonical_json([tensor_object(t) for t in tensors]) given the SplitAxis and ReplicatedAxis types, "
     "without the intermediate dicts; None when a parallel_axes is not an exact tuple or list (its iteration "
     "would run Python code inside the pass)."},
    {"sorted_by_str_keys", (PyCFunction)py_sorted_by_str_keys, METH_VARARGS,
     "sorted(items, key) from the list of keys (exact str each), stable; with rows=True also the position of "
     "each item in it; None when a key is not an exact str. With rows and packed (a fourth argument) only "
     "(positions as native int64 bytes, every key distinct). With rows and index (a fifth argument): "
     "(sorted items, (keys, positions) as two tuples, every key distinct)."},
    {"assembly_columns", (PyCFunction)py_assembly_columns, METH_VARARGS, assembly_columns_doc},
    {"tensor_shape_groups", (PyCFunction)py_tensor_shape_groups, METH_VARARGS, tensor_shape_groups_doc},
    {"tensor_shape_columns", (PyCFunction)py_tensor_shape_columns, METH_VARARGS, tensor_shape_columns_doc},
    {"sorted_groups", (PyCFunction)py_sorted_groups, METH_VARARGS,
     "(sorted items, rows, items by group, extra by group), the groups in sorted order (items a list or a tuple); "
     "None when a key is not "
     "an exact str. The sorted tuple and each group's tuple are untracked by the collector when every item "
     "they hold is inert (no collector support, or an untracked non-dict object). With distinct (a sixth "
     "argument, default False) each group's extras are sorted(set(...)) of them (a tuple of ints); None also "
     "when an extra is not an exact int in range(2**31). With packed (a seventh, default False) rows is bytes "
     "of native int64 (array('q') layout) instead of a list of ints. With catalog (an eighth, a tuple; distinct "
     "only) each group's tuple holds catalog[v] for its values v (None also when a value is not below its length)."},
    {"placement_fragment_id", (PyCFunction)(void (*)(void))py_placement_fragment_id,
     METH_VARARGS | METH_KEYWORDS, "'sha256:' + hex of the canonical placement fragment content (spec 6.1)."},
    {NULL, NULL, 0, NULL},
};

int
Init_Canonical(PyObject *module)
{
#if OPENSSL_VERSION_NUMBER >= 0x30000000L
    if (cj_sha256_fetched == NULL) {
        cj_sha256_fetched = EVP_MD_fetch(NULL, "SHA256", NULL); /* kept for the process */
        if (cj_sha256_fetched == NULL) ERR_clear_error();      /* EVP_sha256() then serves */
    }
#endif
    return PyModule_AddFunctions(module, canonical_methods);
}
