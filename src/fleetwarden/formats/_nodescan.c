/* The native fast path of formats/nodestream.py: one chunk of a node dump's items array
 * (`[` item, item, ... `]`) validated as JSON and turned into node rows, in C.
 *
 * It decides only what it is sure of. It returns the rows exactly as nodestream's msgspec
 * path makes them, or None ("not sure": the caller decodes the chunk with msgspec, which
 * then accepts or refuses it as it always did), or False (a node name twice: the caller
 * refuses the document as the msgspec path would). Everything it accepts is valid JSON
 * (RFC 8259: structure, literals, numbers, escapes, no control characters in strings, UTF-8
 * as Python's strict decoder reads it), so a document it reads is one msgspec reads the same way.
 * Anything unusual -- an escape in a key or value it reads, a long
 * number, a key it reads given twice, a value of another type than the fields' -- is "not
 * sure".
 *
 * How: stage 1 classifies 64 bytes at a time with AVX2 (quotes, backslashes, blanks,
 * brackets and punctuation, control characters), works out which bytes are inside strings
 * (a carry-less multiply gives the running parity of the unescaped quotes), checks the
 * escapes and control characters there, and writes the offsets of the structural bytes
 * (punctuation outside strings, opening quotes, the first byte of every other token). Stage
 * 2 walks those offsets: a small state machine validates what the diff does not read, and
 * the fields it reads (kind, metadata.name/labels, spec.taints/unschedulable,
 * status.allocatable/capacity/nodeInfo) are made into Python objects. Without AVX2 and
 * PCLMUL (or on another architecture) every call answers None.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(NS_NO_SIMD)
#define NS_X86 1
#include <immintrin.h>
#endif

#define OK 0
#define UNSURE 1 /* the caller decodes this chunk with msgspec */
#define FAILED 2 /* a Python exception is set */

#define MAX_DEPTH 64
#define MAX_NUMBER 40 /* longer numbers are left to msgspec */

/* ---------------------------------------------------------------------------------------- */
/* stage 1                                                                                    */


#ifdef NS_X86
static int hexval(uint8_t c) {
    if (c >= '0' && c <= '9') return c - '0';
    c |= 0x20;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* The code unit of the `\uXXXX` escape whose backslash is at `at`, or -1. */
static int code_unit(const uint8_t *buf, size_t len, size_t at) {
    if (at + 5 >= len || buf[at] != '\\' || buf[at + 1] != 'u') return -1;
    int v = 0;
    for (int k = 2; k < 6; k++) {
        int h = hexval(buf[at + k]);
        if (h < 0) return -1;
        v = v * 16 + h;
    }
    return v;
}

/* The escape whose backslash is at `at` (inside a string) is valid JSON as msgspec reads it:
 * a surrogate only as a high one escaped right before a low one. */
static int escape_ok(const uint8_t *buf, size_t len, size_t at) {
    if (at + 1 >= len) return 0;
    switch (buf[at + 1]) {
    case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
        return 1;
    case 'u': {
        int v = code_unit(buf, len, at);
        if (v < 0) return 0;
        if (v >= 0xD800 && v <= 0xDBFF) { /* high: a low one must follow */
            int low = code_unit(buf, len, at + 6);
            return low >= 0xDC00 && low <= 0xDFFF;
        }
        if (v >= 0xDC00 && v <= 0xDFFF) { /* low: right after an escaped high one */
            if (at < 6) return 0;
            int high = code_unit(buf, len, at - 6);
            if (high < 0xD800 || high > 0xDBFF) return 0;
            size_t run = 0; /* that backslash escapes if an odd run of them ends there */
            while (run <= at - 6 && buf[at - 6 - run] == '\\') run++;
            return run % 2 == 1;
        }
        return 1;
    }
    default:
        return 0;
    }
}

#define NS_TARGET __attribute__((target("avx2,pclmul,bmi")))

NS_TARGET static inline uint64_t mask_of(__m256i lo, __m256i hi) {
    return (uint64_t)(uint32_t)_mm256_movemask_epi8(lo) |
           ((uint64_t)(uint32_t)_mm256_movemask_epi8(hi) << 32);
}

NS_TARGET static inline uint64_t running_parity(uint64_t quotes) {
    __m128i q = _mm_set_epi64x(0, (long long)quotes);
    __m128i all = _mm_set1_epi8((char)0xFF);
    return (uint64_t)_mm_cvtsi128_si64(_mm_clmulepi64_si128(q, all, 0));
}

NS_TARGET static inline __m256i eq(__m256i v, char c) {
    return _mm256_cmpeq_epi8(v, _mm256_set1_epi8(c));
}

/* Offsets of the structural bytes of buf[0:len] into tape; their count, or -1 (not valid
 * JSON text, or not sure). *high: some byte is not ASCII. */
NS_TARGET static Py_ssize_t stage1(const uint8_t *buf, size_t len, uint32_t *tape, int *high) {
    uint64_t in_string = 0; /* all ones when the previous block ended inside a string */
    uint64_t escaped_in = 0; /* 1 when the previous block's last byte escapes this one's first */
    uint64_t atom_in = 0;    /* 1 when the previous block ended inside a literal or number */
    uint32_t *out = tape;
    uint8_t tail[64];
    __m256i seen = _mm256_setzero_si256(); /* every byte or-ed: the sign bits tell non-ASCII */
    for (size_t base = 0; base < len; base += 64) {
        const uint8_t *p = buf + base;
        if (len - base < 64) {
            memset(tail, ' ', sizeof tail);
            memcpy(tail, p, len - base);
            p = tail;
        }
        __m256i a = _mm256_loadu_si256((const __m256i *)p);
        __m256i b = _mm256_loadu_si256((const __m256i *)(p + 32));
        seen = _mm256_or_si256(seen, _mm256_or_si256(a, b));
        uint64_t quote = mask_of(eq(a, '"'), eq(b, '"'));
        uint64_t backslash = mask_of(eq(a, '\\'), eq(b, '\\'));
        __m256i ca = _mm256_or_si256(a, _mm256_set1_epi8(0x20)); /* [ ] -> { } */
        __m256i cb = _mm256_or_si256(b, _mm256_set1_epi8(0x20));
        uint64_t punct = mask_of(
            _mm256_or_si256(_mm256_or_si256(eq(ca, '{'), eq(ca, '}')),
                            _mm256_or_si256(eq(a, ':'), eq(a, ','))),
            _mm256_or_si256(_mm256_or_si256(eq(cb, '{'), eq(cb, '}')),
                            _mm256_or_si256(eq(b, ':'), eq(b, ','))));
        uint64_t blank = mask_of(
            _mm256_or_si256(_mm256_or_si256(eq(a, ' '), eq(a, '\n')),
                            _mm256_or_si256(eq(a, '\t'), eq(a, '\r'))),
            _mm256_or_si256(_mm256_or_si256(eq(b, ' '), eq(b, '\n')),
                            _mm256_or_si256(eq(b, '\t'), eq(b, '\r'))));
        __m256i c1f = _mm256_set1_epi8(0x1F);
        uint64_t control = mask_of(_mm256_cmpeq_epi8(_mm256_min_epu8(a, c1f), a),
                                   _mm256_cmpeq_epi8(_mm256_min_epu8(b, c1f), b));
        /* which bytes a backslash escapes: a backslash escapes the next byte unless it is
         * escaped itself (runs of backslashes pair up); rare, so bit by bit */
        uint64_t escaped = escaped_in, escapers = 0;
        escaped_in = 0;
        for (uint64_t m = backslash; m; m &= m - 1) {
            unsigned i = (unsigned)__builtin_ctzll(m);
            if ((escaped >> i) & 1) continue;
            escapers |= 1ULL << i;
            if (i == 63)
                escaped_in = 1;
            else
                escaped |= 1ULL << (i + 1);
        }
        quote &= ~escaped;
        uint64_t inside = running_parity(quote) ^ in_string; /* opening quote .. before closing */
        in_string = (uint64_t)((int64_t)inside >> 63);
        if (control & inside) return -1; /* a raw control character in a string */
        for (uint64_t m = escapers & inside; m; m &= m - 1) {
            if (!escape_ok(buf, len, base + (unsigned)__builtin_ctzll(m))) return -1;
        }
        /* a backslash outside strings is part of a token below, which then fails */
        uint64_t atom = ~(blank | punct | quote | inside);
        uint64_t starts = atom & ~((atom << 1) | atom_in);
        atom_in = atom >> 63;
        uint64_t structural = (punct & ~inside) | (quote & inside) | starts;
        while (structural) {
            *out++ = (uint32_t)(base + (unsigned)__builtin_ctzll(structural));
            structural &= structural - 1;
        }
    }
    *high = _mm256_movemask_epi8(seen) != 0;
    if (in_string || escaped_in) return -1; /* an unterminated string */
    return out - tape;
}

static int native_ok(void) {
    static int known = -1;
    if (known < 0) {
        __builtin_cpu_init();
        known = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("pclmul") &&
                __builtin_cpu_supports("bmi");
    }
    return known;
}
#else
static Py_ssize_t stage1(const uint8_t *buf, size_t len, uint32_t *tape, int *high) {
    (void)buf; (void)len; (void)tape; (void)high;
    return -1;
}
static int native_ok(void) { return 0; }
#endif

/* The bytes are UTF-8 as Python's strict decoder takes it: no overlong forms, no encoded
 * surrogates, nothing above U+10FFFF. */
static int utf8_ok(const uint8_t *s, size_t len) {
    size_t i = 0;
    while (i < len) {
        if (i + 8 <= len) { /* ASCII eight at a time */
            uint64_t v;
            memcpy(&v, s + i, 8);
            if (!(v & 0x8080808080808080ULL)) {
                i += 8;
                continue;
            }
        }
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t n;
        uint8_t lo = 0x80, hi = 0xBF; /* the second byte's range */
        if (c >= 0xC2 && c <= 0xDF) {
            n = 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            n = 3;
            if (c == 0xE0) lo = 0xA0;
            if (c == 0xED) hi = 0x9F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            n = 4;
            if (c == 0xF0) lo = 0x90;
            if (c == 0xF4) hi = 0x8F;
        } else {
            return 0;
        }
        if (i + n > len || s[i + 1] < lo || s[i + 1] > hi) return 0;
        for (size_t k = 2; k < n; k++)
            if ((s[i + k] & 0xC0) != 0x80) return 0;
        i += n;
    }
    return 1;
}

/* ---------------------------------------------------------------------------------------- */
/* stage 2                                                                                    */

typedef struct {
    PyObject *key; /* bytes: the span's content */
    PyObject *value;
    uint64_t hash;
} Slot;

#define SLOTS 1024

typedef struct {
    const uint8_t *buf;
    size_t len;
    const uint32_t *tape;
    Py_ssize_t n; /* structural bytes */
    Py_ssize_t i; /* the next one */
    int ascii;
    PyObject *map_of;    /* bytes of a resource map -> the shared dict */
    PyObject *taints_of; /* bytes of a taints list -> the shared tuple of Taints */
    PyObject *label_keys; /* tuple of str, or NULL: every label, as a dict */
    Py_ssize_t nkeys;
    const char **key_text;
    Py_ssize_t *key_len;
    Slot maps[SLOTS];
    Slot taints[SLOTS];
} Walk;

/* The tape of the last call, kept for the next one (a fresh one would cost a page fault every
 * 1,024 structural bytes); a call made while another is in a callback gets its own. */
static uint32_t *g_spare = NULL;
static size_t g_spare_cap = 0;

static uint8_t g_delim[256]; /* what may follow a literal or number: blanks, punctuation, quote */

#define AT(w) ((w)->i < (w)->n ? (w)->buf[(w)->tape[(w)->i]] : 0)
#define POS(w) ((w)->tape[(w)->i])

/* A literal or number at `pos` (its first byte `c`), valid and followed by a delimiter. */
static int atom_ok(const Walk *w, size_t pos) {
    const uint8_t *s = w->buf;
    size_t len = w->len, end;
    switch (s[pos]) {
    case 't':
        if (len - pos < 4 || memcmp(s + pos, "true", 4)) return 0;
        end = pos + 4;
        break;
    case 'f':
        if (len - pos < 5 || memcmp(s + pos, "false", 5)) return 0;
        end = pos + 5;
        break;
    case 'n':
        if (len - pos < 4 || memcmp(s + pos, "null", 4)) return 0;
        end = pos + 4;
        break;
    default: {
        size_t k = pos;
        if (s[k] == '-') k++;
        if (k >= len) return 0;
        if (s[k] == '0') {
            k++;
        } else if (s[k] >= '1' && s[k] <= '9') {
            while (k < len && s[k] >= '0' && s[k] <= '9') k++;
        } else {
            return 0;
        }
        if (k < len && s[k] == '.') {
            k++;
            size_t d = k;
            while (k < len && s[k] >= '0' && s[k] <= '9') k++;
            if (k == d) return 0;
        }
        if (k < len && (s[k] | 0x20) == 'e') {
            k++;
            if (k < len && (s[k] == '+' || s[k] == '-')) k++;
            size_t d = k;
            while (k < len && s[k] >= '0' && s[k] <= '9') k++;
            if (k == d) return 0;
        }
        if (k - pos > MAX_NUMBER) return 0;
        end = k;
    }
    }
    return end == len || g_delim[s[end]];
}

/* Skips (and validates) the value at the current structural byte. */
static int skip_value(Walk *w) {
    uint8_t stack[MAX_DEPTH];
    int depth = 0;
    uint8_t c = AT(w);
    w->i++;
    if (c == '"') return OK;
    if (c == '{') goto object_begin;
    if (c == '[') goto array_begin;
    if (c == 0 || !atom_ok(w, w->tape[w->i - 1])) return UNSURE;
    return OK;

object_begin:
    if (depth == MAX_DEPTH) return UNSURE;
    stack[depth++] = '{';
    c = AT(w);
    if (c == '}') {
        w->i++;
        goto close;
    }
object_field:
    if (c != '"') return UNSURE;
    w->i++;
    if (AT(w) != ':') return UNSURE;
    w->i++;
    c = AT(w);
    w->i++;
    if (c == '{') goto object_begin;
    if (c == '[') goto array_begin;
    if (c != '"' && (c == 0 || !atom_ok(w, w->tape[w->i - 1]))) return UNSURE;
object_next:
    c = AT(w);
    w->i++;
    if (c == ',') {
        c = AT(w);
        goto object_field;
    }
    if (c == '}') goto close;
    return UNSURE;

array_begin:
    if (depth == MAX_DEPTH) return UNSURE;
    stack[depth++] = '[';
    if (AT(w) == ']') {
        w->i++;
        goto close;
    }
array_value:
    c = AT(w);
    w->i++;
    if (c == '{') goto object_begin;
    if (c == '[') goto array_begin;
    if (c != '"' && (c == 0 || !atom_ok(w, w->tape[w->i - 1]))) return UNSURE;
array_next:
    c = AT(w);
    w->i++;
    if (c == ',') goto array_value;
    if (c == ']') goto close;
    return UNSURE;

close:
    depth--;
    if (depth == 0) return OK;
    if (stack[depth - 1] == '{') goto object_next;
    goto array_next;
}

/* The text of the string whose opening quote is the current structural byte (not moved);
 * UNSURE if it has an escape. */
static int string_at(const Walk *w, const char **text, Py_ssize_t *size) {
    size_t start = POS(w) + 1;
    size_t limit = w->i + 1 < w->n ? w->tape[w->i + 1] : w->len;
    const uint8_t *q = memchr(w->buf + start, '"', limit - start);
    if (q == NULL || memchr(w->buf + start, '\\', (size_t)(q - (w->buf + start)))) return UNSURE;
    *text = (const char *)w->buf + start;
    *size = q - (w->buf + start);
    return OK;
}

static PyObject *make_str(const Walk *w, const char *text, Py_ssize_t size) {
    if (w->ascii) {
        PyObject *s = PyUnicode_New(size, 127);
        if (s) memcpy(PyUnicode_DATA(s), text, (size_t)size);
        return s;
    }
    return PyUnicode_DecodeUTF8(text, size, "strict");
}

/* A string value (or null) into *out (a new reference, or NULL for null). */
static int str_or_null(Walk *w, PyObject **out) {
    uint8_t c = AT(w);
    if (c == 'n') {
        if (!atom_ok(w, POS(w))) return UNSURE;
        w->i++;
        *out = NULL;
        return OK;
    }
    if (c != '"') return UNSURE;
    const char *text;
    Py_ssize_t size;
    if (string_at(w, &text, &size)) return UNSURE;
    w->i++;
    *out = make_str(w, text, size);
    return *out ? OK : FAILED;
}

static int is_null(const Walk *w) { return AT(w) == 'n' && atom_ok(w, POS(w)); }

#define KEY_IS(t, s, lit) ((s) == (Py_ssize_t)(sizeof(lit) - 1) && !memcmp((t), lit, sizeof(lit) - 1))

/* The next field of an object being read: its key's text, and the structural byte moved to
 * its value. `first`: right after the opening brace. 1: a field; 0: the object ended. */
static int next_field(Walk *w, int first, const char **key, Py_ssize_t *size, int *status) {
    uint8_t c = AT(w);
    if (!first) {
        w->i++;
        if (c == '}') return 0;
        if (c != ',') {
            *status = UNSURE;
            return 0;
        }
        c = AT(w);
    } else if (c == '}') {
        w->i++;
        return 0;
    }
    if (c != '"' || string_at(w, key, size)) {
        *status = UNSURE;
        return 0;
    }
    w->i++;
    if (AT(w) != ':') {
        *status = UNSURE;
        return 0;
    }
    w->i++;
    return 1;
}

static uint64_t span_hash(const uint8_t *s, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ n;
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, s, 8);
        h = (h ^ v) * 0xff51afd7ed558ccdULL;
        h ^= h >> 32;
        s += 8;
        n -= 8;
    }
    uint64_t v = 0;
    memcpy(&v, s, n);
    h = (h ^ v) * 0xc4ceb9fe1a85ec53ULL;
    return h ^ (h >> 29);
}

/* What `make(bytes)` gives for the bytes buf[start:end], remembered by content for the call. */
static PyObject *shared_of(Walk *w, Slot *slots, PyObject *make, size_t start, size_t end) {
    const uint8_t *s = w->buf + start;
    size_t n = end - start;
    uint64_t h = span_hash(s, n);
    size_t k = (size_t)h & (SLOTS - 1);
    for (int probe = 0; probe < 16; probe++, k = (k + 1) & (SLOTS - 1)) {
        Slot *slot = &slots[k];
        if (slot->key == NULL) {
            PyObject *key = PyBytes_FromStringAndSize((const char *)s, (Py_ssize_t)n);
            if (key == NULL) return NULL;
            PyObject *value = PyObject_CallOneArg(make, key);
            if (value == NULL) {
                Py_DECREF(key);
                return NULL;
            }
            slot->key = key;
            slot->value = value;
            slot->hash = h;
            Py_INCREF(value);
            return value;
        }
        if (slot->hash == h && (size_t)PyBytes_GET_SIZE(slot->key) == n &&
            !memcmp(PyBytes_AS_STRING(slot->key), s, n)) {
            Py_INCREF(slot->value);
            return slot->value;
        }
    }
    PyObject *key = PyBytes_FromStringAndSize((const char *)s, n); /* the table is crowded */
    if (key == NULL) return NULL;
    PyObject *value = PyObject_CallOneArg(make, key);
    Py_DECREF(key);
    return value;
}

typedef struct {
    PyObject *name, *labels, *taints, *kubelet, *os, *allocatable, *capacity;
    int unschedulable;
} Row;

static void row_clear(Row *r) {
    Py_CLEAR(r->name);
    Py_CLEAR(r->labels);
    Py_CLEAR(r->taints);
    Py_CLEAR(r->kubelet);
    Py_CLEAR(r->os);
    Py_CLEAR(r->allocatable);
    Py_CLEAR(r->capacity);
}

static int read_labels(Walk *w, Row *r) {
    const char *key;
    Py_ssize_t size;
    int status = OK;
    w->i++; /* { */
    if (w->label_keys == NULL) {
        r->labels = PyDict_New();
        if (r->labels == NULL) return FAILED;
        for (int first = 1; next_field(w, first, &key, &size, &status); first = 0) {
            if (AT(w) != '"') return UNSURE;
            PyObject *k = make_str(w, key, size), *v = NULL;
            if (k == NULL || str_or_null(w, &v) != OK) {
                Py_XDECREF(k);
                return PyErr_Occurred() ? FAILED : UNSURE;
            }
            Py_ssize_t had = PyDict_GET_SIZE(r->labels);
            int failed = PyDict_SetItem(r->labels, k, v);
            Py_DECREF(k);
            Py_DECREF(v);
            if (failed) return FAILED;
            if (PyDict_GET_SIZE(r->labels) == had) return UNSURE; /* a key twice */
        }
        return status;
    }
    Py_ssize_t nkeys = w->nkeys;
    r->labels = PyTuple_New(nkeys);
    if (r->labels == NULL) return FAILED;
    for (int first = 1; next_field(w, first, &key, &size, &status); first = 0) {
        Py_ssize_t j = 0;
        for (; j < nkeys; j++) {
            if (w->key_len[j] == size && !memcmp(w->key_text[j], key, (size_t)size)) break;
        }
        if (j == nkeys) {
            int s = skip_value(w);
            if (s) return s;
            continue;
        }
        if (PyTuple_GET_ITEM(r->labels, j) != NULL || AT(w) != '"') return UNSURE;
        PyObject *v = NULL;
        int s = str_or_null(w, &v);
        if (s) return s;
        PyTuple_SET_ITEM(r->labels, j, v);
    }
    if (status) return status;
    for (Py_ssize_t j = 0; j < nkeys; j++) {
        if (PyTuple_GET_ITEM(r->labels, j) == NULL) {
            Py_INCREF(Py_None);
            PyTuple_SET_ITEM(r->labels, j, Py_None);
        }
    }
    return OK;
}

/* The value at the current structural byte, skipped; its bytes are buf[*start:*end]. */
static int span_of(Walk *w, size_t *start, size_t *end) {
    uint8_t c = AT(w);
    *start = POS(w);
    if (c != '{' && c != '[') return UNSURE; /* not a map or a list: msgspec decides */
    int s = skip_value(w);
    if (s) return s;
    *end = w->tape[w->i - 1] + 1;
    return OK;
}

static int read_metadata(Walk *w, Row *r) {
    const char *key;
    Py_ssize_t size;
    int status = OK, seen_name = 0, seen_labels = 0;
    w->i++;
    for (int first = 1; next_field(w, first, &key, &size, &status); first = 0) {
        int s;
        if (KEY_IS(key, size, "name")) {
            if (seen_name++) return UNSURE;
            s = str_or_null(w, &r->name);
        } else if (KEY_IS(key, size, "labels")) {
            if (seen_labels++) return UNSURE;
            if (is_null(w)) {
                w->i++;
                s = OK;
            } else if (AT(w) == '{') {
                s = read_labels(w, r);
            } else {
                s = UNSURE;
            }
        } else {
            s = skip_value(w);
        }
        if (s) return s;
    }
    return status;
}

static int read_spec(Walk *w, Row *r) {
    const char *key;
    Py_ssize_t size;
    int status = OK, seen_taints = 0, seen_unschedulable = 0;
    w->i++;
    for (int first = 1; next_field(w, first, &key, &size, &status); first = 0) {
        int s = OK;
        if (KEY_IS(key, size, "taints")) {
            if (seen_taints++) return UNSURE;
            if (is_null(w)) {
                w->i++;
            } else if (AT(w) == '[' && w->i + 1 < w->n && w->buf[w->tape[w->i + 1]] == ']') {
                w->i += 2; /* [] */
            } else {
                size_t start, end;
                s = span_of(w, &start, &end);
                if (s == OK && w->buf[start] != '[') s = UNSURE;
                if (s == OK) {
                    r->taints = shared_of(w, w->taints, w->taints_of, start, end);
                    if (r->taints == NULL) return FAILED;
                }
            }
        } else if (KEY_IS(key, size, "unschedulable")) {
            if (seen_unschedulable++) return UNSURE;
            size_t at = POS(w);
            if (AT(w) == 't' && atom_ok(w, at)) {
                r->unschedulable = 1;
            } else if (AT(w) == 'f' && atom_ok(w, at)) {
                r->unschedulable = 0;
            } else {
                return UNSURE;
            }
            w->i++;
        } else {
            s = skip_value(w);
        }
        if (s) return s;
    }
    return status;
}

static int read_node_info(Walk *w, Row *r) {
    const char *key;
    Py_ssize_t size;
    int status = OK, seen_kubelet = 0, seen_os = 0;
    w->i++;
    for (int first = 1; next_field(w, first, &key, &size, &status); first = 0) {
        int s;
        if (KEY_IS(key, size, "kubeletVersion")) {
            if (seen_kubelet++) return UNSURE;
            s = str_or_null(w, &r->kubelet);
        } else if (KEY_IS(key, size, "osImage")) {
            if (seen_os++) return UNSURE;
            s = str_or_null(w, &r->os);
        } else {
            s = skip_value(w);
        }
        if (s) return s;
    }
    return status;
}

static int read_map(Walk *w, PyObject **out) {
    if (*out != NULL) return UNSURE; /* given twice */
    if (is_null(w)) {
        w->i++;
        return OK; /* as when absent */
    }
    size_t start, end;
    int s = span_of(w, &start, &end);
    if (s) return s;
    if (w->buf[start] != '{') return UNSURE;
    *out = shared_of(w, w->maps, w->map_of, start, end);
    return *out ? OK : FAILED;
}

static int read_status(Walk *w, Row *r) {
    const char *key;
    Py_ssize_t size;
    int status = OK, seen_info = 0, seen_allocatable = 0, seen_capacity = 0;
    w->i++;
    for (int first = 1; next_field(w, first, &key, &size, &status); first = 0) {
        int s;
        if (KEY_IS(key, size, "allocatable")) {
            if (seen_allocatable++) return UNSURE;
            s = read_map(w, &r->allocatable);
        } else if (KEY_IS(key, size, "capacity")) {
            if (seen_capacity++) return UNSURE;
            s = read_map(w, &r->capacity);
        } else if (KEY_IS(key, size, "nodeInfo")) {
            if (seen_info++) return UNSURE;
            if (is_null(w)) {
                w->i++;
                s = OK;
            } else if (AT(w) == '{') {
                s = read_node_info(w, r);
            } else {
                s = UNSURE;
            }
        } else {
            s = skip_value(w);
        }
        if (s) return s;
    }
    return status;
}

static int read_item(Walk *w, Row *r) {
    const char *key;
    Py_ssize_t size;
    int status = OK, seen_kind = 0, seen_meta = 0, seen_spec = 0, seen_status = 0;
    w->i++; /* { */
    for (int first = 1; next_field(w, first, &key, &size, &status); first = 0) {
        int s = OK;
        if (KEY_IS(key, size, "kind")) {
            const char *text;
            Py_ssize_t n;
            if (seen_kind++) return UNSURE;
            if (is_null(w)) {
                w->i++;
            } else if (AT(w) == '"' && string_at(w, &text, &n) == OK && KEY_IS(text, n, "Node")) {
                w->i++;
            } else {
                return UNSURE; /* another kind: msgspec's path refuses it */
            }
        } else if (KEY_IS(key, size, "metadata")) {
            if (seen_meta++ || AT(w) != '{') return UNSURE;
            s = read_metadata(w, r);
        } else if (KEY_IS(key, size, "spec")) {
            if (seen_spec++) return UNSURE;
            if (is_null(w)) {
                w->i++;
            } else if (AT(w) == '{') {
                s = read_spec(w, r);
            } else {
                return UNSURE;
            }
        } else if (KEY_IS(key, size, "status")) {
            if (seen_status++) return UNSURE;
            if (is_null(w)) {
                w->i++;
            } else if (AT(w) == '{') {
                s = read_status(w, r);
            } else {
                return UNSURE;
            }
        } else {
            s = skip_value(w);
        }
        if (s) return s;
    }
    if (status) return status;
    if (r->name == NULL || PyUnicode_GET_LENGTH(r->name) == 0) return UNSURE;
    return OK;
}

static PyObject *g_empty_tuple, *g_null_bytes;

static PyObject *row_tuple(Walk *w, Row *r) {
    if (r->labels == NULL) {
        r->labels = w->label_keys == NULL ? PyDict_New() : NULL;
        if (w->label_keys != NULL) {
            r->labels = PyTuple_New(w->nkeys);
            if (r->labels)
                for (Py_ssize_t j = 0; j < w->nkeys; j++) {
                    Py_INCREF(Py_None);
                    PyTuple_SET_ITEM(r->labels, j, Py_None);
                }
        }
        if (r->labels == NULL) return NULL;
    }
    if (r->taints == NULL) {
        Py_INCREF(g_empty_tuple);
        r->taints = g_empty_tuple;
    }
    if (r->allocatable == NULL &&
        !(r->allocatable = PyObject_CallOneArg(w->map_of, g_null_bytes)))
        return NULL;
    if (r->capacity == NULL && !(r->capacity = PyObject_CallOneArg(w->map_of, g_null_bytes)))
        return NULL;
    PyObject *t = PyTuple_New(8);
    if (t == NULL) return NULL;
#define TAKE(j, field)                                                                     \
    do {                                                                                   \
        PyObject *v_ = r->field ? r->field : Py_None;                                      \
        if (!r->field) Py_INCREF(Py_None);                                                 \
        r->field = NULL;                                                                   \
        PyTuple_SET_ITEM(t, j, v_);                                                        \
    } while (0)
    TAKE(0, name);
    TAKE(1, labels);
    TAKE(2, taints);
    TAKE(3, kubelet);
    TAKE(4, os);
    TAKE(5, allocatable);
    TAKE(6, capacity);
#undef TAKE
    PyObject *u = r->unschedulable ? Py_True : Py_False;
    Py_INCREF(u);
    PyTuple_SET_ITEM(t, 7, u);
    return t;
}

static int read_items(Walk *w, PyObject *rows) {
    if (AT(w) != '[') return UNSURE;
    w->i++;
    if (AT(w) == ']') {
        w->i++;
        return w->i == w->n ? OK : UNSURE;
    }
    for (;;) {
        if (AT(w) != '{') return UNSURE;
        Row r = {0};
        int s = read_item(w, &r);
        PyObject *t = s == OK ? row_tuple(w, &r) : NULL;
        row_clear(&r);
        if (s) return s;
        if (t == NULL) return FAILED;
        int failed = PyList_Append(rows, t);
        Py_DECREF(t);
        if (failed) return FAILED;
        uint8_t c = AT(w);
        w->i++;
        if (c == ']') break;
        if (c != ',') return UNSURE;
    }
    return w->i == w->n ? OK : UNSURE;
}

static void slots_clear(Slot *slots) {
    for (int k = 0; k < SLOTS; k++) {
        Py_CLEAR(slots[k].key);
        Py_CLEAR(slots[k].value);
    }
}

PyDoc_STRVAR(rows_doc,
"rows(chunk, label_keys, map_of, taints_of, names, /) -> list | None | False\n\n"
"The node rows of ``chunk`` (``[`` items ``]``) as nodestream's msgspec path makes them;\n"
"None when not sure (decode the chunk with msgspec); False when a node name is in ``names``\n"
"already or twice in the chunk. ``label_keys``: a tuple of label keys (each row gives their\n"
"values, None where missing) or None (every label, as a dict); the chunk's UTF-8 is checked\n"
"here (not UTF-8: None). ``map_of(bytes)`` / ``taints_of(bytes)``\n"
"turn a resource map's / a taint list's JSON into the shared value; the names of the rows\n"
"are added to the set ``names`` when the whole chunk is read.");

static PyObject *ns_rows(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "rows() takes 5 arguments");
        return NULL;
    }
    PyObject *keys = args[1] == Py_None ? NULL : args[1];
    if (keys != NULL && !PyTuple_Check(keys)) {
        PyErr_SetString(PyExc_TypeError, "label_keys must be a tuple or None");
        return NULL;
    }
    if (!PySet_Check(args[4])) {
        PyErr_SetString(PyExc_TypeError, "names must be a set");
        return NULL;
    }
    if (!native_ok()) Py_RETURN_NONE;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) return NULL;
    PyObject *result = NULL, *rows = NULL;
    uint32_t *tape = NULL;
    size_t tape_cap = 0;
    Walk *w = PyMem_Calloc(1, sizeof(Walk));
    Py_ssize_t nkeys = keys ? PyTuple_GET_SIZE(keys) : 0;
    const char **key_text = PyMem_Calloc((size_t)nkeys + 1, sizeof(char *));
    Py_ssize_t *key_len = PyMem_Calloc((size_t)nkeys + 1, sizeof(Py_ssize_t));
    if (w == NULL || key_text == NULL || key_len == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t j = 0; j < nkeys; j++) {
        PyObject *k = PyTuple_GET_ITEM(keys, j);
        if (!PyUnicode_Check(k)) {
            PyErr_SetString(PyExc_TypeError, "label keys must be str");
            goto done;
        }
        key_text[j] = PyUnicode_AsUTF8AndSize(k, &key_len[j]);
        if (key_text[j] == NULL) goto done;
    }
    size_t len = (size_t)view.len;
    if (len >= UINT32_MAX - 64) {
        result = Py_None; /* offsets are 32-bit: msgspec reads such a chunk */
        Py_INCREF(result);
        goto done;
    }
    if (g_spare != NULL && g_spare_cap >= len + 1) { /* at most a structural a byte */
        tape = g_spare, tape_cap = g_spare_cap;
        g_spare = NULL;
    } else {
        tape = PyMem_RawMalloc((len + 1) * sizeof(uint32_t));
        tape_cap = len + 1;
        if (tape == NULL) {
            PyErr_NoMemory();
            goto done;
        }
    }
    int high = 0;
    Py_ssize_t n = stage1((const uint8_t *)view.buf, len, tape, &high);
    if (n < 0 || (high && !utf8_ok((const uint8_t *)view.buf, len))) {
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    w->buf = view.buf;
    w->len = len;
    w->tape = tape;
    w->n = n;
    w->ascii = !high;
    w->map_of = args[2];
    w->taints_of = args[3];
    w->label_keys = keys;
    w->nkeys = nkeys;
    w->key_text = key_text;
    w->key_len = key_len;
    rows = PyList_New(0);
    if (rows == NULL) goto done;
    int s = read_items(w, rows);
    if (s == FAILED) goto done;
    if (s == UNSURE) {
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    PyObject *names = args[4];
    Py_ssize_t had = PySet_GET_SIZE(names), count = PyList_GET_SIZE(rows);
    for (Py_ssize_t j = 0; j < count; j++) {
        if (PySet_Add(names, PyTuple_GET_ITEM(PyList_GET_ITEM(rows, j), 0)) < 0) goto done;
    }
    if (PySet_GET_SIZE(names) - had != count) {
        result = Py_False;
        Py_INCREF(result);
        goto done;
    }
    result = rows;
    rows = NULL;
done:
    if (w) {
        slots_clear(w->maps);
        slots_clear(w->taints);
    }
    if (tape != NULL && (g_spare == NULL || g_spare_cap < tape_cap)) {
        PyMem_RawFree(g_spare);
        g_spare = tape, g_spare_cap = tape_cap;
    } else {
        PyMem_RawFree(tape);
    }
    PyMem_Free(w);
    PyMem_Free(key_text);
    PyMem_Free(key_len);
    Py_XDECREF(rows);
    PyBuffer_Release(&view);
    return result;
}

static PyObject *ns_available(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    return PyBool_FromLong(native_ok());
}

static PyMethodDef methods[] = {
    {"rows", (PyCFunction)(void (*)(void))ns_rows, METH_FASTCALL, rows_doc},
    {"available", ns_available, METH_NOARGS,
     "available() -> bool: this CPU runs the fast path (AVX2, PCLMUL); else rows() is None."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "fleetwarden.formats._nodescan",
    "The native fast path of nodestream: see rows().", -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__nodescan(void) {
    const char *delims = " \t\r\n,:[]{}\"";
    for (const char *d = delims; *d; d++) g_delim[(uint8_t)*d] = 1;
    g_empty_tuple = PyTuple_New(0);
    g_null_bytes = PyBytes_FromString("null");
    if (g_empty_tuple == NULL || g_null_bytes == NULL) return NULL;
    PyObject *m = PyModule_Create(&module);
    PyObject *all = Py_BuildValue("[ss]", "available", "rows");
    if (m == NULL || all == NULL || PyModule_AddObject(m, "__all__", all) < 0) {
        Py_XDECREF(all);
        Py_XDECREF(m);
        return NULL;
    }
    return m;
}
