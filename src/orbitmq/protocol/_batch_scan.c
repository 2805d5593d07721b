/* orbitmq.protocol._batch_scan: a batch send body split into columns in one pass (see batch.py).
 *
 * The compiled half of protocol/batch.py's scan_plain_batch; batch.py holds the pure-Python
 * version, which gives the same answer for every input (tests/unit/protocol/test_batch_scan.py
 * runs both). Only the common case is handled here: every inner record well formed, and every
 * property string ASCII, canonical (see decode_properties_canonical) and made of the given keys
 * only. Anything else answers None, and the caller takes the general path, which words errors.
 *
 * scan_plain_batch(data, keys) -> None | (flags, bodies, properties, values)
 *   data        a bytes-like batch body
 *   keys        a tuple of 1..8 bytes: the property names a plain message may carry
 *   flags       list[int], each record's user flag
 *   bodies      list[bytes]
 *   properties  list[bytes], each property string without the C++ client's trailing 0x02
 *   values      tuple of one list[str | None] per key: each message's value of that key
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define MAX_KEYS 8
#define HEAD_BYTES 20     /* total_size, magic, body_crc, flag, body_len */
#define FIXED_BYTES 22    /* HEAD_BYTES + properties_len */
#define NAME_VALUE 0x01
#define SEPARATOR 0x02

static int32_t
read_int(const unsigned char *p)
{
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3]);
}

static int16_t
read_short(const unsigned char *p)
{
    return (int16_t)(((uint16_t)p[0] << 8) | (uint16_t)p[1]);
}

typedef struct {
    const char *name;
    Py_ssize_t length;
} Key;

/* Parse one property string [p, p + n) (trailing separator already dropped). On success fill
 * found[i] with the value span of keys[i] (start offset, or -1 when absent) and answer 1;
 * answer 0 for anything that is not plain. */
static int
parse_plain(const unsigned char *p, Py_ssize_t n, const Key *keys, int key_count,
            Py_ssize_t *value_start, Py_ssize_t *value_end)
{
    for (int k = 0; k < key_count; k++) {
        value_start[k] = -1;
    }
    if (n == 0) {
        return 1;
    }
    Py_ssize_t item = 0;
    while (item <= n) {
        const unsigned char *end_p = memchr(p + item, SEPARATOR, (size_t)(n - item));
        Py_ssize_t end = end_p ? (Py_ssize_t)(end_p - p) : n;
        const unsigned char *mark_p = memchr(p + item, NAME_VALUE, (size_t)(end - item));
        if (mark_p == NULL) {
            return 0; /* an empty item, or one without a name/value separator */
        }
        Py_ssize_t mark = (Py_ssize_t)(mark_p - p);
        if (memchr(p + mark + 1, NAME_VALUE, (size_t)(end - mark - 1)) != NULL) {
            return 0; /* a second name/value separator */
        }
        Py_ssize_t key_length = mark - item;
        int matched = -1;
        for (int k = 0; k < key_count; k++) {
            if (keys[k].length == key_length && memcmp(keys[k].name, p + item, (size_t)key_length) == 0) {
                matched = k;
                break;
            }
        }
        if (matched < 0 || value_start[matched] >= 0) {
            return 0; /* a key outside the set, or a repeated key */
        }
        value_start[matched] = mark + 1;
        value_end[matched] = end;
        item = end + 1;
    }
    return 1;
}

static int
is_ascii(const unsigned char *p, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t word;
        memcpy(&word, p + i, 8);
        if (word & 0x8080808080808080ULL) {
            return 0;
        }
    }
    for (; i < n; i++) {
        if (p[i] & 0x80) {
            return 0;
        }
    }
    return 1;
}

static PyObject *
scan_plain_batch(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "scan_plain_batch(data, keys) takes two arguments");
        return NULL;
    }
    if (!PyTuple_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "keys must be a tuple of bytes");
        return NULL;
    }
    Py_ssize_t key_count = PyTuple_GET_SIZE(args[1]);
    if (key_count < 1 || key_count > MAX_KEYS) {
        PyErr_SetString(PyExc_ValueError, "keys must hold 1 to 8 names");
        return NULL;
    }
    Key keys[MAX_KEYS];
    for (Py_ssize_t k = 0; k < key_count; k++) {
        PyObject *name = PyTuple_GET_ITEM(args[1], k);
        if (!PyBytes_Check(name)) {
            PyErr_SetString(PyExc_TypeError, "keys must be a tuple of bytes");
            return NULL;
        }
        keys[k].name = PyBytes_AS_STRING(name);
        keys[k].length = PyBytes_GET_SIZE(name);
    }

    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    const unsigned char *data = (const unsigned char *)view.buf;
    Py_ssize_t size = view.len;

    PyObject *flags = PyList_New(0);
    PyObject *bodies = PyList_New(0);
    PyObject *properties = PyList_New(0);
    PyObject *values = PyTuple_New(key_count);
    PyObject *result = NULL;
    if (flags == NULL || bodies == NULL || properties == NULL || values == NULL) {
        goto done;
    }
    for (Py_ssize_t k = 0; k < key_count; k++) {
        PyObject *column = PyList_New(0);
        if (column == NULL) {
            goto done;
        }
        PyTuple_SET_ITEM(values, k, column);
    }

    Py_ssize_t position = 0;
    while (position < size) {
        Py_ssize_t remaining = size - position;
        if (remaining < FIXED_BYTES) {
            goto plain_no;
        }
        const unsigned char *record = data + position;
        int32_t total_size = read_int(record);
        int32_t flag = read_int(record + 12);
        int32_t body_length = read_int(record + 16);
        if (body_length < 0 || (Py_ssize_t)body_length > remaining - FIXED_BYTES) {
            goto plain_no;
        }
        const unsigned char *properties_at = record + HEAD_BYTES + body_length;
        int16_t properties_length = read_short(properties_at);
        Py_ssize_t expected = FIXED_BYTES + (Py_ssize_t)body_length + (Py_ssize_t)properties_length;
        if (properties_length < 0 || expected > remaining || (Py_ssize_t)total_size != expected) {
            goto plain_no;
        }
        const unsigned char *text = properties_at + 2;
        Py_ssize_t text_length = properties_length;
        if (!is_ascii(text, text_length)) {
            goto plain_no;
        }
        if (text_length > 0 && text[text_length - 1] == SEPARATOR) {
            text_length--;
        }
        Py_ssize_t value_start[MAX_KEYS], value_end[MAX_KEYS];
        if (!parse_plain(text, text_length, keys, (int)key_count, value_start, value_end)) {
            goto plain_no;
        }

        PyObject *item = PyLong_FromLong((long)flag);
        if (item == NULL || PyList_Append(flags, item) < 0) {
            Py_XDECREF(item);
            goto done;
        }
        Py_DECREF(item);
        item = PyBytes_FromStringAndSize((const char *)record + HEAD_BYTES, body_length);
        if (item == NULL || PyList_Append(bodies, item) < 0) {
            Py_XDECREF(item);
            goto done;
        }
        Py_DECREF(item);
        item = PyBytes_FromStringAndSize((const char *)text, text_length);
        if (item == NULL || PyList_Append(properties, item) < 0) {
            Py_XDECREF(item);
            goto done;
        }
        Py_DECREF(item);
        for (Py_ssize_t k = 0; k < key_count; k++) {
            PyObject *column = PyTuple_GET_ITEM(values, k);
            if (value_start[k] < 0) {
                if (PyList_Append(column, Py_None) < 0) {
                    goto done;
                }
                continue;
            }
            item = PyUnicode_DecodeASCII((const char *)text + value_start[k], value_end[k] - value_start[k], NULL);
            if (item == NULL || PyList_Append(column, item) < 0) {
                Py_XDECREF(item);
                goto done;
            }
            Py_DECREF(item);
        }
        position += expected;
    }
    result = PyTuple_Pack(4, flags, bodies, properties, values);
    goto done;

plain_no:
    result = Py_NewRef(Py_None);

done:
    PyBuffer_Release(&view);
    Py_XDECREF(flags);
    Py_XDECREF(bodies);
    Py_XDECREF(properties);
    Py_XDECREF(values);
    return result;
}

static PyMethodDef methods[] = {
    {"scan_plain_batch", (PyCFunction)(void (*)(void))scan_plain_batch, METH_FASTCALL,
     "scan_plain_batch(data, keys) -> None | (flags, bodies, properties, values); see batch.py."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "orbitmq.protocol._batch_scan",
    "A batch send body split into columns in one pass (the compiled half of batch.py).",
    -1,
    methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC
PyInit__batch_scan(void)
{
    return PyModule_Create(&module_def);
}
