/* fabricase._native: hot loops of recording and analysis, in C.

   Optional. setup.py builds it where a C compiler and Python's headers are present; without it the same
   functions run in Python (fabricase.native says which is in use). Each function here does exactly what its
   Python original does on the inputs it accepts, and declines the rest (returns None / stops early) so that the
   Python code decides every unusual case, with its own errors:

   - plain_counters: parsers/ethtool.py's _plain_table on ASCII text.
   - scan_items: the clean item frames of collectors/framing.py's scan_stream, from a position on.
   - index_items: capture_scan.scan_host's loop over those items (item paths, first read wins, the index's
     values per item and, built with OpenSSL's headers, each item's sha256).
   - xml_tops: parsers/nvidia_smi.py's ElementTree parse and _flatten_xml of a plain `nvidia-smi -q -x` report.

   tests/test_native.py holds each equal to its Python original over real, generated and hostile inputs.
   Every loop is one pass over its input: linear time, bounded memory, no recursion. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* ---- plain_counters ------------------------------------------------------------------------------------- */

static int is_name_char(unsigned char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
           c == '-';
}

/* str.strip()'s whitespace among ASCII characters (Py_UNICODE_ISSPACE). */
static int is_py_space(unsigned char c) {
    return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f);
}

/* One line [p, e) against _PLAIN_LINE: ^[ \t]*([A-Za-z0-9_.\-]+)[ \t]*:[ \t\r]*([0-9]{1,40})[ \t\r]*$.
   On a match, the name's and the digits' spans. */
static int plain_line(const char *p, const char *e, const char **n0, const char **n1, const char **d0,
                      const char **d1) {
    while (p < e && (*p == ' ' || *p == '\t')) p++;
    *n0 = p;
    while (p < e && is_name_char((unsigned char)*p)) p++;
    if (p == *n0) return 0;
    *n1 = p;
    while (p < e && (*p == ' ' || *p == '\t')) p++;
    if (p == e || *p != ':') return 0;
    p++;
    while (p < e && (*p == ' ' || *p == '\t' || *p == '\r')) p++;
    *d0 = p;
    while (p < e && *p >= '0' && *p <= '9') p++;
    *d1 = p;
    if (*d1 == *d0 || *d1 - *d0 > 40) return 0;
    while (p < e && (*p == ' ' || *p == '\t' || *p == '\r')) p++;
    return p == e;
}

/* A blank line, or one that ends with "statistics:" once stripped. */
static int header_or_blank(const char *p, const char *e) {
    static const char tail[] = "statistics:";
    const Py_ssize_t k = (Py_ssize_t)(sizeof(tail) - 1);
    while (p < e && is_py_space((unsigned char)*p)) p++;
    while (e > p && is_py_space((unsigned char)e[-1])) e--;
    if (p == e) return 1;
    return e - p >= k && memcmp(e - k, tail, (size_t)k) == 0;
}

/* The line at *cursor (moved past it; *more cleared after the last line): 1 a counter line (the name's and the
   digits' spans set), 0 a blank line or a "... statistics:" header, -1 any other line. */
static int table_line(const char **cursor, const char *end, int *more, const char **n0, const char **n1,
                      const char **d0, const char **d1) {
    const char *line = *cursor;
    const char *nl = memchr(line, '\n', (size_t)(end - line));
    const char *e = nl ? nl : end;
    *more = nl != NULL;
    *cursor = nl ? nl + 1 : end;
    if (plain_line(line, e, n0, n1, d0, d1)) return 1;
    return header_or_blank(line, e) ? 0 : -1;
}

static PyObject *digits_value(const char *d0, const char *d1) {
    if (d1 - d0 <= 18) {
        long long v = 0;
        for (const char *q = d0; q < d1; q++) v = v * 10 + (*q - '0');
        return PyLong_FromLongLong(v);
    }
    char buf[48];
    memcpy(buf, d0, (size_t)(d1 - d0));
    buf[d1 - d0] = '\0';
    return PyLong_FromString(buf, NULL, 10);
}

PyDoc_STRVAR(plain_counters_doc,
"plain_counters(text, names=None) -> dict | list | None | NotImplemented\n\n"
"_plain_table(text) of parsers.ethtool: {name: value} when every line is a plain counter line, a blank line or\n"
"a '... statistics:' header and the names are distinct, else None. NotImplemented for text that is not ASCII.\n"
"`names`, a tuple of distinct ASCII names (a layout read before): when the text's counter lines name exactly\n"
"these, in this order, the values alone, as a list (no name is built or hashed); otherwise as without it.");

/* The values of a plain table whose counter lines name `names` in order; Py_None where it is not such a table
   (the caller reads it again without the hint), NULL on error. */
static PyObject *hinted_values(const char *s, const char *end, PyObject *names) {
    const Py_ssize_t count = PyTuple_GET_SIZE(names);
    PyObject *values = PyList_New(count);
    if (values == NULL) return NULL;
    Py_ssize_t i = 0;
    const char *cursor = s, *n0, *n1, *d0, *d1;
    for (int more = 1; more;) {
        const int kind = table_line(&cursor, end, &more, &n0, &n1, &d0, &d1);
        if (kind < 0) goto other;
        if (kind == 0) continue;
        PyObject *want = i < count ? PyTuple_GET_ITEM(names, i) : NULL;
        if (want == NULL || !PyUnicode_Check(want) || !PyUnicode_IS_ASCII(want) ||
            PyUnicode_GET_LENGTH(want) != n1 - n0 || memcmp(PyUnicode_DATA(want), n0, (size_t)(n1 - n0)) != 0)
            goto other;
        PyObject *value = digits_value(d0, d1);
        if (value == NULL) {
            Py_DECREF(values);
            return NULL;
        }
        PyList_SET_ITEM(values, i, value);
        i++;
    }
    if (i == count) return values;
other:
    Py_DECREF(values);  /* the items set so far are released with it; the others are NULL */
    Py_RETURN_NONE;
}

static PyObject *plain_counters(PyObject *self, PyObject *args) {
    PyObject *arg, *names = Py_None;
    if (!PyArg_ParseTuple(args, "U|O", &arg, &names)) return NULL;
    if (names != Py_None && !PyTuple_Check(names)) {
        PyErr_SetString(PyExc_TypeError, "plain_counters: names is a tuple or None");
        return NULL;
    }
    if (!PyUnicode_IS_ASCII(arg)) Py_RETURN_NOTIMPLEMENTED;
    const char *s = (const char *)PyUnicode_DATA(arg);
    const char *end = s + PyUnicode_GET_LENGTH(arg);
    if (names != Py_None) {
        PyObject *values = hinted_values(s, end, names);
        if (values != Py_None) return values;  /* the list, or NULL */
        Py_DECREF(values);
    }
    PyObject *table = PyDict_New();
    if (table == NULL) return NULL;
    const char *cursor = s, *n0, *n1, *d0, *d1;
    for (int more = 1; more;) {
        const int kind = table_line(&cursor, end, &more, &n0, &n1, &d0, &d1);
        if (kind < 0) {
            Py_DECREF(table);
            Py_RETURN_NONE;
        }
        if (kind == 0) continue;
        PyObject *name = PyUnicode_FromStringAndSize(n0, n1 - n0);
        if (name == NULL) goto fail;
        int present = PyDict_Contains(table, name);
        if (present != 0) {  /* a repeated name (or an error) */
            Py_DECREF(name);
            if (present < 0) goto fail;
            Py_DECREF(table);
            Py_RETURN_NONE;
        }
        PyObject *value = digits_value(d0, d1);
        if (value == NULL || PyDict_SetItem(table, name, value) < 0) {
            Py_DECREF(name);
            Py_XDECREF(value);
            goto fail;
        }
        Py_DECREF(name);
        Py_DECREF(value);
    }
    return table;
fail:
    Py_DECREF(table);
    return NULL;
}

/* ---- scan_items ------------------------------------------------------------------------------------------ */

static const char MAGIC_ITEM[] = "@@FC1 I ";
#define MAGIC_ITEM_LEN 8
#define MAX_DIGITS 18

/* framing._int on [p, e): an optional minus and 1-18 ASCII digits. */
static int frame_int(const char *p, const char *e, long long *out) {
    int negative = 0;
    if (p < e && *p == '-') {
        negative = 1;
        p++;
    }
    if (p == e || e - p > MAX_DIGITS) return 0;
    long long v = 0;
    for (; p < e; p++) {
        if (*p < '0' || *p > '9') return 0;
        v = v * 10 + (*p - '0');
    }
    *out = negative ? -v : v;
    return 1;
}

/* The clean item frame at `pos`, as _ITEM_HEADER and scan_stream's checks take it: "@@FC1 I ", eight fields each
   [^ \n]* and its space (the key), the source up to the line's end, a size (field 5) of 0..max_item, and the
   content's closing newline inside the data. 0 for anything else (the Python code reads it). */
typedef struct {
    const char *key0, *key1, *nl;  /* the key is [key0, key1), the source [key1, nl) */
    Py_ssize_t content, stop;      /* the content is [content, stop); data[stop] is its newline */
    long long size;
} CleanItem;

static int clean_item_at(const char *data, Py_ssize_t end, Py_ssize_t pos, Py_ssize_t max_item, CleanItem *it) {
    if (end - pos < MAGIC_ITEM_LEN || memcmp(data + pos, MAGIC_ITEM, MAGIC_ITEM_LEN) != 0) return 0;
    const char *p = data + pos + MAGIC_ITEM_LEN, *stop_at = data + end;
    const char *size0 = NULL, *size1 = NULL;
    it->key0 = p;
    for (int fields = 0; fields < 8; fields++) {
        const char *f0 = p;
        while (p < stop_at && *p != ' ' && *p != '\n') p++;
        if (p == stop_at || *p != ' ') return 0;
        if (fields == 4) {
            size0 = f0;
            size1 = p;
        }
        p++;
    }
    it->key1 = p;
    it->nl = memchr(p, '\n', (size_t)(stop_at - p));
    if (it->nl == NULL) return 0;
    if (!frame_int(size0, size1, &it->size) || it->size < 0 || it->size > max_item) return 0;
    it->content = (it->nl - data) + 1;
    if (it->size >= end - it->content) return 0;  /* the closing newline must be inside data */
    it->stop = it->content + (Py_ssize_t)it->size;
    return data[it->stop] == '\n';
}

PyDoc_STRVAR(scan_items_doc,
"scan_items(data, pos, max_item) -> (items, pos)\n\n"
"The item frames of a framed stream from `pos` on that scan_stream's item path takes without a question: a\n"
"header matching _ITEM_HEADER, a size of 0..max_item, and the content's closing newline inside `data`. Each item\n"
"is (start, key, source, content start, content stop): key the header's fields before the source (bytes),\n"
"source decoded as UTF-8 with surrogateescape. Stops at the first frame that is not such an item (any other\n"
"frame, a malformed, oversized or cut item) and returns its position, for the Python code to read.");

static PyObject *scan_items(PyObject *self, PyObject *args) {
    Py_buffer buf;
    Py_ssize_t pos, max_item;
    if (!PyArg_ParseTuple(args, "y*nn", &buf, &pos, &max_item)) return NULL;
    const char *data = (const char *)buf.buf;
    const Py_ssize_t end = buf.len;
    PyObject *items = PyList_New(0);
    if (items == NULL) goto fail;
    if (pos < 0) pos = 0;
    while (pos < end) {
        CleanItem it;
        if (!clean_item_at(data, end, pos, max_item, &it)) break;
        const char *key0 = it.key0, *key1 = it.key1, *nl = it.nl;
        const Py_ssize_t content = it.content, stop = it.stop;
        PyObject *key = PyBytes_FromStringAndSize(key0, key1 - key0);
        PyObject *source = key ? PyUnicode_DecodeUTF8(key1, nl - key1, "surrogateescape") : NULL;
        PyObject *item = source ? Py_BuildValue("(nOOnn)", pos, key, source, content, stop) : NULL;
        Py_XDECREF(key);
        Py_XDECREF(source);
        if (item == NULL || PyList_Append(items, item) < 0) {
            Py_XDECREF(item);
            goto fail;
        }
        Py_DECREF(item);
        pos = stop + 1;
    }
    PyBuffer_Release(&buf);
    PyObject *result = Py_BuildValue("(Nn)", items, pos);
    return result;
fail:
    Py_XDECREF(items);
    PyBuffer_Release(&buf);
    return NULL;
}

/* ---- index_items ----------------------------------------------------------------------------------------- */

#ifdef FABRICASE_HAVE_OPENSSL
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/sha.h>
#endif

/* capture_records._item_path on a source's raw bytes (the checks read only ASCII bytes, which UTF-8 with
   surrogateescape decodes to the same characters): the item's place in the host folder, Py_None for a source
   that is refused, NULL on error. */
static PyObject *item_path(const char *src, Py_ssize_t len, PyObject *source, long long snapshot, int stderr_kind) {
    if (len >= 4 && memcmp(src, "cmd:", 4) == 0) {
        if (len == 4) Py_RETURN_NONE;
        for (Py_ssize_t i = 4; i < len; i++)
            if (!is_name_char((unsigned char)src[i])) Py_RETURN_NONE;
        PyObject *name = PyUnicode_FromStringAndSize(src + 4, len - 4);
        if (name == NULL) return NULL;
        PyObject *path = PyUnicode_FromFormat("s%lld/cmd/%U%s", snapshot, name, stderr_kind ? ".stderr" : "");
        Py_DECREF(name);
        return path;
    }
    if (len == 0 || src[0] != '/') Py_RETURN_NONE;
    for (Py_ssize_t i = 0; i + 2 < len; i++)  /* "/../" in source + "/" */
        if (src[i] == '/' && src[i + 1] == '.' && src[i + 2] == '.' && (i + 3 == len || src[i + 3] == '/'))
            Py_RETURN_NONE;
    /* "s<snapshot>/fs" + source; the prefix of the last snapshot kept (a stream's items come snapshot by snapshot) */
    static PyObject *prefix = NULL;
    static long long prefix_of = -1;
    if (prefix == NULL || prefix_of != snapshot) {
        Py_CLEAR(prefix);
        prefix = PyUnicode_FromFormat("s%lld/fs", snapshot);
        if (prefix == NULL) return NULL;
        prefix_of = snapshot;
    }
    return PyUnicode_Concat(prefix, source);
}

PyDoc_STRVAR(index_items_doc,
"index_items(data, pos, max_item, heads, head_of, seen, sources, rows, offsets, digests, special, stderr)\n"
"    -> (status, pos, count)\n\n"
"capture_scan.scan_host's loop over the run of clean items from `pos` (those scan_items reads). Per item: its\n"
"header's entry from `heads` (key -> (size, known, index values) or None), head_of(key) filling in a key not\n"
"there; (source, snapshot, start, stop) appended to `stderr` for a stderr item; then, unless item_path refuses\n"
"the source or `seen` already holds its path, its source, index values and offset appended to `sources`, `rows`\n"
"and `offsets`, its sha256 to the `digests` bytearray (None: the caller hashes), and its row to `special` where\n"
"it is a command's item or a failed read. status 1: the header at `pos` is malformed (its entry is None); 0: the\n"
"frame at `pos` is not a clean item, for the Python code. count: the items read, refused and repeated included.");

static PyObject *index_items(PyObject *self, PyObject *args) {
    Py_buffer buf;
    Py_ssize_t pos, max_item, count = 0;
    PyObject *heads, *head_of, *seen, *sources, *rows, *offsets, *digests, *special, *stderr_items;
    if (!PyArg_ParseTuple(args, "y*nnO!OO!O!O!O!OO!O!", &buf, &pos, &max_item, &PyDict_Type, &heads, &head_of,
                          &PySet_Type, &seen, &PyList_Type, &sources, &PyList_Type, &rows, &PyList_Type, &offsets,
                          &digests, &PyList_Type, &special, &PyList_Type, &stderr_items))
        return NULL;
    int status = 0;
    PyObject *last_key = NULL, *last_entry = NULL;  /* the header fields of the item before, and their entry */
    if (digests != Py_None) {
#ifdef FABRICASE_HAVE_OPENSSL
        if (!PyByteArray_Check(digests)) {
            PyErr_SetString(PyExc_TypeError, "index_items: digests is a bytearray or None");
            goto fail;
        }
#else
        PyErr_SetString(PyExc_ValueError, "index_items: built without OpenSSL (native.HASHES is False)");
        goto fail;
#endif
    }
    const char *data = (const char *)buf.buf;
    const Py_ssize_t end = buf.len;
    if (pos < 0) pos = 0;
    while (pos < end) {
        CleanItem it;
        if (!clean_item_at(data, end, pos, max_item, &it)) break;
        const char *key0 = it.key0, *key1 = it.key1, *nl = it.nl;
        const Py_ssize_t content = it.content, stop = it.stop;
        const long long n = it.size;

        PyObject *entry;
        if (last_key != NULL && PyBytes_GET_SIZE(last_key) == key1 - key0 &&
            memcmp(PyBytes_AS_STRING(last_key), key0, (size_t)(key1 - key0)) == 0) {
            entry = last_entry;  /* most items repeat the header fields of the one before */
            Py_INCREF(entry);
        } else {
            PyObject *key = PyBytes_FromStringAndSize(key0, key1 - key0);
            if (key == NULL) goto fail;
            entry = PyDict_GetItemWithError(heads, key);  /* borrowed */
            if (entry != NULL) {
                Py_INCREF(entry);
            } else if (PyErr_Occurred()) {
                Py_DECREF(key);
                goto fail;
            } else {
                entry = PyObject_CallOneArg(head_of, key);
                if (entry == NULL) {
                    Py_DECREF(key);
                    goto fail;
                }
            }
            Py_XSETREF(last_key, key);
            Py_INCREF(entry);
            Py_XSETREF(last_entry, entry);
        }
        if (entry == Py_None) {
            Py_DECREF(entry);
            status = 1;
            break;
        }
        if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) != 3 || !PyTuple_Check(PyTuple_GET_ITEM(entry, 1)) ||
            PyTuple_GET_SIZE(PyTuple_GET_ITEM(entry, 1)) < 4) {
            Py_DECREF(entry);
            PyErr_SetString(PyExc_TypeError, "index_items: a head is (size, known, values)");
            goto fail;
        }
        PyObject *known = PyTuple_GET_ITEM(entry, 1), *values = PyTuple_GET_ITEM(entry, 2);
        PyObject *kind = PyTuple_GET_ITEM(known, 1), *snap = PyTuple_GET_ITEM(known, 2);
        PyObject *rc = PyTuple_GET_ITEM(known, 3);
        long long snapshot = PyLong_AsLongLong(snap);
        if (snapshot == -1 && PyErr_Occurred()) {
            Py_DECREF(entry);
            goto fail;
        }
        const int stderr_kind = PyUnicode_Check(kind) && PyUnicode_CompareWithASCIIString(kind, "stderr") == 0;
        int failed = 0;
        if (!stderr_kind && rc != Py_None) {
            int zero = PyObject_Not(rc);
            if (zero < 0) {
                Py_DECREF(entry);
                goto fail;
            }
            failed = !zero;
        }
        count++;
        PyObject *source = PyUnicode_DecodeUTF8(key1, nl - key1, "surrogateescape");
        if (source == NULL) {
            Py_DECREF(entry);
            goto fail;
        }
        if (stderr_kind) {
            PyObject *span = Py_BuildValue("(OOnn)", source, snap, content, stop);
            if (span == NULL || PyList_Append(stderr_items, span) < 0) {
                Py_XDECREF(span);
                Py_DECREF(source);
                Py_DECREF(entry);
                goto fail;
            }
            Py_DECREF(span);
        }
        pos = stop + 1;
        PyObject *path = item_path(key1, nl - key1, source, snapshot, stderr_kind);
        int skip = path == Py_None;
        if (path != NULL && !skip) {
            int there = PySet_Contains(seen, path);
            skip = there == 1;
            if (there < 0 || (!skip && PySet_Add(seen, path) < 0)) Py_CLEAR(path);
        }
        if (path == NULL) {
            Py_DECREF(source);
            Py_DECREF(entry);
            goto fail;
        }
        Py_DECREF(path);
        if (skip) {  /* refused, or a second read of one path: the first read wins */
            Py_DECREF(source);
            Py_DECREF(entry);
            continue;
        }
        const Py_ssize_t row = PyList_GET_SIZE(sources);
        const int is_cmd = nl - key1 >= 4 && memcmp(key1, "cmd:", 4) == 0;
        int bad = PyList_Append(sources, source) < 0 || PyList_Append(rows, values) < 0;
        Py_DECREF(source);
        Py_DECREF(entry);
        if (!bad) {
            PyObject *at = PyLong_FromSsize_t(content);
            bad = at == NULL || PyList_Append(offsets, at) < 0;
            Py_XDECREF(at);
        }
        if (!bad && (is_cmd || failed)) {
            PyObject *r = PyLong_FromSsize_t(row);
            bad = r == NULL || PyList_Append(special, r) < 0;
            Py_XDECREF(r);
        }
#ifdef FABRICASE_HAVE_OPENSSL
        if (!bad && digests != Py_None) {
            const Py_ssize_t had = PyByteArray_GET_SIZE(digests);
            bad = PyByteArray_Resize(digests, had + SHA256_DIGEST_LENGTH) < 0;
            if (!bad)
                SHA256((const unsigned char *)data + content, (size_t)n,
                       (unsigned char *)PyByteArray_AS_STRING(digests) + had);
        }
#endif
        if (bad) goto fail;
    }
    Py_XDECREF(last_key);
    Py_XDECREF(last_entry);
    PyBuffer_Release(&buf);
    return Py_BuildValue("(inn)", status, pos, count);
fail:
    Py_XDECREF(last_key);
    Py_XDECREF(last_entry);
    PyBuffer_Release(&buf);
    return NULL;
}


/* ---- xml_tops ------------------------------------------------------------------------------------------- */

/* parsers/nvidia_smi.py's reading of a whole `nvidia-smi -q -x` document (ElementTree.fromstring, then
   _flatten_xml of each <gpu>), on the plain XML nvidia-smi writes: ASCII, an optional `<?xml version="1.0" ?>`
   and `<!DOCTYPE name SYSTEM "...">`, elements with at most one attribute, text without entity references.
   Anything else (a comment, CDATA, a processing instruction, an entity, a carriage return, a namespace, a
   second attribute, a name with a colon, a mismatched or unclosed tag, nesting past XML_MAX_DEPTH) is declined:
   None, and the Python code parses the document with its own errors. */

#define XML_MAX_DEPTH 256
#define XML_MAX_PATH 4096

typedef struct {
    const char *name;
    Py_ssize_t len;
    Py_ssize_t prefix;       /* where its name sits in the path (depth 2 and deeper) */
    Py_ssize_t child_prefix; /* the path's length before a child's name */
    const char *content;     /* just past the start tag */
    const char *first_child; /* the '<' of the first child element; NULL while none */
    int skipped;             /* no leaves recorded below (not a wanted element, or past the path's room) */
} xml_frame;

static int xml_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n'; }

static int xml_name_start(unsigned char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; }

static const char *xml_skip_space(const char *p, const char *end) {
    while (p < end && xml_space((unsigned char)*p)) p++;
    return p;
}

static int xml_starts(const char *p, const char *end, const char *word) {
    size_t k = strlen(word);
    return (size_t)(end - p) >= k && memcmp(p, word, k) == 0;
}

/* One pseudo-attribute of the XML declaration: ` name="value"` (or 'value'); the value's span. */
static const char *xml_pseudo(const char *p, const char *end, const char *name, const char **v0, const char **v1) {
    const char *q = xml_skip_space(p, end);
    if (q == p || !xml_starts(q, end, name)) return NULL;
    q = xml_skip_space(q + strlen(name), end);
    if (q >= end || *q != '=') return NULL;
    q = xml_skip_space(q + 1, end);
    if (q >= end || (*q != '"' && *q != '\'')) return NULL;
    const char quote = *q++;
    *v0 = q;
    while (q < end && *q != quote && *q != '<' && *q != '>') q++;
    if (q >= end || *q != quote) return NULL;
    *v1 = q;
    return q + 1;
}

static int xml_equal_nocase(const char *a0, const char *a1, const char *word) {
    size_t k = strlen(word);
    if ((size_t)(a1 - a0) != k) return 0;
    for (size_t i = 0; i < k; i++) {
        char c = a0[i];
        if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
        if (c != word[i]) return 0;
    }
    return 1;
}

/* `<?xml version="1.0" [encoding="UTF-8"] [standalone="yes|no"] ?>` from just past "<?xml"; past its "?>". */
static const char *xml_decl(const char *p, const char *end) {
    const char *v0, *v1, *q;
    p = xml_pseudo(p, end, "version", &v0, &v1);
    if (p == NULL || v1 - v0 != 3 || memcmp(v0, "1.0", 3) != 0) return NULL;
    if ((q = xml_pseudo(p, end, "encoding", &v0, &v1)) != NULL) {
        if (!xml_equal_nocase(v0, v1, "utf-8")) return NULL;
        p = q;
    }
    if ((q = xml_pseudo(p, end, "standalone", &v0, &v1)) != NULL) {
        if (!(v1 - v0 == 3 && memcmp(v0, "yes", 3) == 0) && !(v1 - v0 == 2 && memcmp(v0, "no", 2) == 0)) return NULL;
        p = q;
    }
    p = xml_skip_space(p, end);
    return xml_starts(p, end, "?>") ? p + 2 : NULL;
}

/* `<!DOCTYPE name [SYSTEM "literal"]>` from just past "<!DOCTYPE"; past its ">". */
static const char *xml_doctype(const char *p, const char *end) {
    const char *q = xml_skip_space(p, end);
    if (q == p || q >= end || !xml_name_start((unsigned char)*q)) return NULL;
    while (q < end && is_name_char((unsigned char)*q)) q++;
    const char *r = xml_skip_space(q, end);
    if (r > q && xml_starts(r, end, "SYSTEM")) {
        q = xml_skip_space(r + 6, end);
        if (q == r + 6 || q >= end || (*q != '"' && *q != '\'')) return NULL;
        const char quote = *q++;
        while (q < end && *q != quote && *q != '<' && *q != '>' && *q != '[') q++;
        if (q >= end || *q != quote) return NULL;
        r = xml_skip_space(q + 1, end);
    }
    return r < end && *r == '>' ? r + 1 : NULL;
}

/* str.strip() of ASCII text without control characters but tab and newline. */
static PyObject *xml_stripped(const char *a, const char *b) {
    while (a < b && xml_space((unsigned char)*a)) a++;
    while (b > a && xml_space((unsigned char)b[-1])) b--;
    return PyUnicode_FromStringAndSize(a, b - a);
}

PyDoc_STRVAR(xml_tops_doc,
             "xml_tops(text, wanted, max_path) -> list | None\n\n"
             "The children of the document element, each (tag, id attribute or None, text before its first child "
             "or None, {path: stripped text} of the leaves below it or None, cut): the leaves only for elements "
             "named `wanted`, as nvidia_smi._flatten_xml keys them (a name longer than the path's room left of "
             "max_path leaves its subtree out and sets cut). None: declined (see above).");

/* What xml_tops builds as it reads: its rows, and the element of the document element's open now. */
typedef struct {
    PyObject *out;    /* the rows so far */
    PyObject *leaves; /* the open wanted element's {path: text}, else NULL */
    PyObject *ident;  /* the open element's id attribute, else NULL */
    char *path;       /* the open element's path below the wanted element (max_path + 2 bytes) */
    int cut;          /* a name past the path's room was left out below the open element */
    int root_done;    /* the document element is closed */
} xml_state;

/* Close the element `f` at `depth` (1: the document element), its content ending at content_end (an end tag's
   "<", or the content's start for "<name/>"): a child of the document element becomes its row, a leaf below a
   wanted element its path and stripped text (the first of a path wins). 0, or -1 with an exception set. */
static int xml_close(xml_state *st, const xml_frame *f, int depth, const char *content_end) {
    if (depth == 1) {
        st->root_done = 1;
        return 0;
    }
    if (depth == 2) {
        const char *t1 = f->first_child ? f->first_child : content_end;
        PyObject *tag = PyUnicode_FromStringAndSize(f->name, f->len);
        PyObject *body = t1 > f->content ? PyUnicode_FromStringAndSize(f->content, t1 - f->content)
                                         : Py_NewRef(Py_None);
        PyObject *row = (tag && body) ? Py_BuildValue("(OOOON)", tag, st->ident ? st->ident : Py_None, body,
                                                      st->leaves ? st->leaves : Py_None, PyBool_FromLong(st->cut))
                                      : NULL;
        Py_XDECREF(tag);
        Py_XDECREF(body);
        Py_CLEAR(st->ident);
        Py_CLEAR(st->leaves);
        const int failed = row == NULL || PyList_Append(st->out, row) < 0;
        Py_XDECREF(row);
        return failed ? -1 : 0;
    }
    if (f->skipped || f->first_child != NULL) return 0;  /* not a leaf below a wanted element */
    PyObject *key = PyUnicode_FromStringAndSize(st->path, f->prefix + f->len);
    PyObject *value = key ? xml_stripped(f->content, content_end) : NULL;
    PyObject *kept = value ? PyDict_SetDefault(st->leaves, key, value) : NULL;
    Py_XDECREF(key);
    Py_XDECREF(value);
    return kept == NULL ? -1 : 0;
}

static PyObject *xml_tops(PyObject *self, PyObject *args) {
    PyObject *text;
    const char *wanted;
    Py_ssize_t wanted_len, max_path;
    xml_state st = {NULL, NULL, NULL, NULL, 0, 0};
    xml_frame *stack = NULL;
    int depth = 0;
    (void)self;
    if (!PyArg_ParseTuple(args, "Us#n", &text, &wanted, &wanted_len, &max_path)) return NULL;
    if (PyUnicode_READY(text) < 0) return NULL;
    if (!PyUnicode_IS_ASCII(text) || max_path < 0 || max_path > XML_MAX_PATH) Py_RETURN_NONE;
    const char *s = (const char *)PyUnicode_1BYTE_DATA(text), *end = s + PyUnicode_GET_LENGTH(text);
    for (const char *c = s; c < end; c++) {  /* control characters, entities, "]]>": the Python code's */
        const unsigned char b = (unsigned char)*c;
        if ((b < 0x20 && b != '\t' && b != '\n') || b == '&' || (b == '>' && c - s >= 2 && c[-1] == ']' && c[-2] == ']'))
            Py_RETURN_NONE;
    }
    const char *p = s;  /* a declaration comes first or not at all */
    if (xml_starts(p, end, "<?xml") && (p = xml_decl(p + 5, end)) == NULL) Py_RETURN_NONE;
    p = xml_skip_space(p, end);
    if (xml_starts(p, end, "<!DOCTYPE") && (p = xml_doctype(p + 9, end)) == NULL) Py_RETURN_NONE;
    if ((st.out = PyList_New(0)) == NULL) return NULL;
    st.path = PyMem_Malloc((size_t)max_path + 2);
    stack = PyMem_Malloc(sizeof(xml_frame) * XML_MAX_DEPTH);
    if (st.path == NULL || stack == NULL) {
        PyErr_NoMemory();
        goto error;
    }
    for (;;) {
        const char *lt = memchr(p, '<', (size_t)(end - p));
        if (depth == 0) {  /* before or after the document element: white space only */
            const char *w = xml_skip_space(p, lt ? lt : end);
            if (w != (lt ? lt : end)) goto declined;
            if (lt == NULL) {
                if (!st.root_done) goto declined;
                break;
            }
            if (st.root_done) goto declined;
        } else if (lt == NULL) {
            goto declined;  /* cut short: elements left open */
        }
        p = lt;
        if (p + 1 >= end) goto declined;
        if (p[1] == '!' || p[1] == '?') goto declined;
        if (p[1] == '/') {  /* an end tag */
            if (depth == 0) goto declined;
            const xml_frame *f = &stack[depth - 1];
            const char *q = p + 2;
            if ((size_t)(end - q) < (size_t)f->len || memcmp(q, f->name, (size_t)f->len) != 0) goto declined;
            q = xml_skip_space(q + f->len, end);
            if (q >= end || *q != '>') goto declined;
            if (xml_close(&st, f, depth, p) < 0) goto error;
            p = q + 1;
            depth--;
            continue;
        }
        /* a start tag: a name, at most one attribute, then ">" or "/>" */
        const char *q = p + 1, *aname = NULL, *aval = NULL;
        Py_ssize_t alen = 0, avlen = 0;
        int self_closing = 0;
        if (!xml_name_start((unsigned char)*q)) goto declined;
        const char *name = q;
        while (q < end && is_name_char((unsigned char)*q)) q++;
        const Py_ssize_t nlen = q - name;
        for (;;) {
            const char *w = q;
            q = xml_skip_space(q, end);
            if (q >= end) goto declined;
            if (*q == '>') {
                q++;
                break;
            }
            if (*q == '/') {
                if (q + 1 >= end || q[1] != '>') goto declined;
                q += 2;
                self_closing = 1;
                break;
            }
            if (q == w || aname != NULL || !xml_name_start((unsigned char)*q)) goto declined;
            aname = q;
            while (q < end && is_name_char((unsigned char)*q)) q++;
            alen = q - aname;
            if (alen >= 5 && memcmp(aname, "xmlns", 5) == 0) goto declined;
            q = xml_skip_space(q, end);
            if (q >= end || *q != '=') goto declined;
            q = xml_skip_space(q + 1, end);
            if (q >= end || (*q != '"' && *q != '\'')) goto declined;
            const char quote = *q++;
            aval = q;
            while (q < end && *q != quote) {
                if (*q == '<' || *q == '\t' || *q == '\n') goto declined;  /* an error, or normalized by expat */
                q++;
            }
            if (q >= end) goto declined;
            avlen = q - aval;
            q++;
        }
        if (depth == XML_MAX_DEPTH) goto declined;
        if (depth >= 1 && stack[depth - 1].first_child == NULL) stack[depth - 1].first_child = p;
        xml_frame *f = &stack[depth];
        f->name = name;
        f->len = nlen;
        f->content = q;
        f->first_child = NULL;
        f->prefix = f->child_prefix = 0;
        if (depth == 0) {
            if (st.root_done) goto declined;
            f->skipped = 1;
        } else if (depth == 1) {
            const int is_wanted = nlen == wanted_len && memcmp(name, wanted, (size_t)nlen) == 0;
            f->skipped = !is_wanted;
            st.cut = 0;
            if (aname != NULL && alen == 2 && memcmp(aname, "id", 2) == 0 &&
                (st.ident = PyUnicode_FromStringAndSize(aval, avlen)) == NULL)
                goto error;
            if (is_wanted && (st.leaves = PyDict_New()) == NULL) goto error;
        } else {
            const xml_frame *parent = &stack[depth - 1];
            if (parent->skipped) {
                f->skipped = 1;
            } else if (nlen > max_path - parent->child_prefix) {
                f->skipped = 1;
                st.cut = 1;
            } else {
                if (depth >= 3) st.path[parent->prefix + parent->len] = '/';
                f->skipped = 0;
                f->prefix = parent->child_prefix;
                f->child_prefix = f->prefix + nlen + 1;
                memcpy(st.path + f->prefix, name, (size_t)nlen);
            }
        }
        depth++;
        p = q;
        if (self_closing) {  /* closed at once, with no content */
            if (xml_close(&st, f, depth, q) < 0) goto error;
            depth--;
        }
    }
    PyMem_Free(st.path);
    PyMem_Free(stack);
    return st.out;
declined:
    PyMem_Free(st.path);
    PyMem_Free(stack);
    Py_XDECREF(st.out);
    Py_XDECREF(st.leaves);
    Py_XDECREF(st.ident);
    Py_RETURN_NONE;
error:
    PyMem_Free(st.path);
    PyMem_Free(stack);
    Py_XDECREF(st.out);
    Py_XDECREF(st.leaves);
    Py_XDECREF(st.ident);
    return NULL;
}

static PyMethodDef methods[] = {
    {"plain_counters", plain_counters, METH_VARARGS, plain_counters_doc},
    {"scan_items", scan_items, METH_VARARGS, scan_items_doc},
    {"index_items", index_items, METH_VARARGS, index_items_doc},
    {"xml_tops", xml_tops, METH_VARARGS, xml_tops_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "fabricase._native", "Optional C versions of two hot loops (see fabricase.native).",
    -1, methods,
};

PyMODINIT_FUNC PyInit__native(void) {
    PyObject *m = PyModule_Create(&module);
#ifdef FABRICASE_HAVE_OPENSSL
    const long hashes = 1;
#else
    const long hashes = 0;
#endif
    if (m != NULL && PyModule_AddIntConstant(m, "HASHES", hashes) < 0) Py_CLEAR(m);
    return m;
}
