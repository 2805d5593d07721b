/* orbitmq.filter._property_scan: the named properties' raw values of many stored records in one call.
 *
 * The compiled half of filter/records.py's record_values; records.py holds the pure-Python
 * version, which answers the same for every input (tests/unit/filter/test_property_scan.py runs
 * both). A property filter's memo is keyed by these values, so with them the caller decides a
 * record with one dict lookup and never copies a record out before it is known to match.
 *
 * record_values(buffer, base, limit, rows, names) -> list
 *   buffer                 a bytes-like object (a mapped commit-log segment)
 *   base                   the position in the log of buffer[0]
 *   limit                  the bytes of buffer that may be read (0 <= limit <= len(buffer))
 *   rows                   a list of tuples starting (offset, size): a record's position in
 *                          the log and its length
 *   names                  a tuple of str: the property names whose values are wanted
 * Each row's answer:
 *   None   the record does not lie wholly in buffer[:limit] (or its size is not positive)
 *   False  the record is truncated before the end of its properties
 *          (protocol.message_codec.stored_message_property_bytes would raise)
 *   tuple  one value per name: the bytes after "name 0x01" up to the next 0x02, at the last
 *          "0x02 name 0x01" or else at a leading "name 0x01"; None when absent
 *
 * The record layout (protocol/message_codec.py): SYSFLAG is the big-endian int at 36; BODYLEN
 * an int at 84, 12 bytes later for each IPv6 host (sysFlag 0x10 born host, 0x20 store host:
 * message_codec.body_length_position); then the body, a TOPICLEN byte, the topic, a
 * PROPERTIESLEN short and the property string.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define SYSFLAG_LAST_BYTE 39 /* the host bits are in the last byte of the big-endian SYSFLAG */
#define NAME_VALUE 0x01
#define SEPARATOR 0x02
#define MAX_NAMES 64

/* BODYLEN's position by the two host bits (message_codec._BODY_LENGTH_POSITIONS). */
static const Py_ssize_t body_length_positions[4] = {84, 96, 96, 108};

typedef struct {
    const unsigned char *name; /* UTF-8, owned by the str */
    Py_ssize_t length;
} Name;

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

/* The property string of the record [r, r + n): its start and length, or 0 when truncated. */
static int
property_span(const unsigned char *r, Py_ssize_t n, const unsigned char **text, Py_ssize_t *text_length)
{
    if (n <= SYSFLAG_LAST_BYTE) {
        return 0;
    }
    Py_ssize_t p = body_length_positions[(r[SYSFLAG_LAST_BYTE] >> 4) & 3];
    if (p > n - 4) {
        return 0;
    }
    int32_t body_length = read_int(r + p);
    if (body_length < 0) {
        return 0;
    }
    Py_ssize_t topic_at = p + 4 + (Py_ssize_t)body_length;
    if (topic_at >= n) {
        return 0;
    }
    Py_ssize_t q = topic_at + 1 + (Py_ssize_t)r[topic_at];
    if (q > n - 2) {
        return 0;
    }
    int16_t properties_length = read_short(r + q);
    if (properties_length < 0 || (Py_ssize_t)properties_length > n - q - 2) {
        return 0;
    }
    *text = r + q + 2;
    *text_length = properties_length;
    return 1;
}

/* The value of "name" in text, as a new bytes object, or a new reference to None. */
static PyObject *
value_of(const unsigned char *text, Py_ssize_t n, const Name *name)
{
    Py_ssize_t k = name->length;
    Py_ssize_t start = -1;
    /* The last "0x02 name 0x01" (k + 2 bytes). */
    for (Py_ssize_t i = n - k - 2; i >= 0; i--) {
        if (text[i] == SEPARATOR && text[i + k + 1] == NAME_VALUE && memcmp(text + i + 1, name->name, (size_t)k) == 0) {
            start = i + k + 2;
            break;
        }
    }
    if (start < 0) {
        if (n >= k + 1 && text[k] == NAME_VALUE && memcmp(text, name->name, (size_t)k) == 0) {
            start = k + 1;
        }
        else {
            Py_RETURN_NONE;
        }
    }
    const unsigned char *end = memchr(text + start, SEPARATOR, (size_t)(n - start));
    Py_ssize_t stop = end != NULL ? end - text : n;
    return PyBytes_FromStringAndSize((const char *)text + start, stop - start);
}

static PyObject *
record_values(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "record_values takes five arguments");
        return NULL;
    }
    long long base = PyLong_AsLongLong(args[1]);
    Py_ssize_t limit = PyLong_AsSsize_t(args[2]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    PyObject *rows = args[3], *name_tuple = args[4];
    if (!PyList_Check(rows) || !PyTuple_Check(name_tuple)) {
        PyErr_SetString(PyExc_TypeError, "record_values: rows must be a list and names a tuple");
        return NULL;
    }
    Py_ssize_t name_count = PyTuple_GET_SIZE(name_tuple);
    if (name_count > MAX_NAMES) {
        PyErr_Format(PyExc_ValueError, "record_values: at most %d names", MAX_NAMES);
        return NULL;
    }
    Name names[MAX_NAMES];
    for (Py_ssize_t k = 0; k < name_count; k++) {
        PyObject *name = PyTuple_GET_ITEM(name_tuple, k);
        if (!PyUnicode_Check(name)) {
            PyErr_SetString(PyExc_TypeError, "record_values: names must be str");
            return NULL;
        }
        const char *utf8 = PyUnicode_AsUTF8AndSize(name, &names[k].length);
        if (utf8 == NULL) {
            return NULL;
        }
        names[k].name = (const unsigned char *)utf8;
    }

    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    PyObject *result = NULL;
    if (limit < 0 || limit > view.len) {
        PyErr_Format(PyExc_ValueError, "record_values: limit %zd is outside a buffer of %zd", limit, view.len);
        goto done;
    }
    Py_ssize_t count = PyList_GET_SIZE(rows);
    result = PyList_New(count);
    if (result == NULL) {
        goto done;
    }
    const unsigned char *data = (const unsigned char *)view.buf;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *row = PyList_GET_ITEM(rows, i);
        if (!PyTuple_Check(row) || PyTuple_GET_SIZE(row) < 2) {
            PyErr_SetString(PyExc_TypeError, "record_values: each row must be a tuple (offset, size, ...)");
            goto fail;
        }
        long long offset = PyLong_AsLongLong(PyTuple_GET_ITEM(row, 0));
        long long size = PyLong_AsLongLong(PyTuple_GET_ITEM(row, 1));
        if (PyErr_Occurred()) {
            goto fail;
        }
        PyObject *answer;
        /* offset >= base, so the unsigned difference is exact whatever the two values are. */
        if (size <= 0 || size > (long long)limit || offset < base
            || (unsigned long long)offset - (unsigned long long)base > (unsigned long long)((long long)limit - size)) {
            answer = Py_NewRef(Py_None);
        }
        else {
            const unsigned char *text;
            Py_ssize_t text_length;
            const unsigned char *record = data + (Py_ssize_t)((unsigned long long)offset - (unsigned long long)base);
            if (!property_span(record, (Py_ssize_t)size, &text, &text_length)) {
                answer = Py_NewRef(Py_False);
            }
            else {
                answer = PyTuple_New(name_count);
                if (answer == NULL) {
                    goto fail;
                }
                for (Py_ssize_t k = 0; k < name_count; k++) {
                    PyObject *value = value_of(text, text_length, &names[k]);
                    if (value == NULL) {
                        Py_DECREF(answer);
                        goto fail;
                    }
                    PyTuple_SET_ITEM(answer, k, value);
                }
            }
        }
        PyList_SET_ITEM(result, i, answer);
    }
    goto done;
fail:
    Py_CLEAR(result);
done:
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"record_values", (PyCFunction)(void (*)(void))record_values, METH_FASTCALL,
     "record_values(buffer, base, limit, rows, names) -> list; "
     "see filter/records.py."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "orbitmq.filter._property_scan",
    "Named properties' raw values of many stored records in one call (the compiled half of records.py).",
    -1,
    methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC
PyInit__property_scan(void)
{
    return PyModule_Create(&module_def);
}
