/* orbitmq.spark._record_columns: a pull body's stored records as Arrow column buffers, in one pass.
 *
 * The compiled half of spark/_arrow_records.py's records_batch; _arrow_records.py holds the
 * NumPy twin, which gives the same rows (tests/unit/spark/test_spark_schema.py runs both).
 * Only the common record is handled: IPv4 hosts, an uncompressed body, sizes that tile the
 * body. Anything else answers None and the caller takes another path. Text is not checked
 * for UTF-8 here: the caller validates the string arrays it builds from these buffers.
 *
 * record_columns(body) -> None | tuple of
 *   count                      int, records in the body
 *   queue_id, reconsume_times  int32[count]
 *   queue_offset               int64[count]
 *   born_us, store_us          int64[count], the timestamps in microseconds
 *   body, topic, msg_id        (int32 offsets[count + 1], data) each
 *   properties                 int32 map offsets[count + 1], then (offsets, data) of the keys
 *                              and of the values, one entry per name/value item (empty items
 *                              and items without a 0x01 are skipped; a value runs from the
 *                              first 0x01 to the item's end)
 *   tags, keys                 (offsets, data, validity bitmap, null count) each: the last
 *                              value of TAGS and of KEYS, null when absent
 * msg_id is the last UNIQ_KEY, else the broker's offsetMsgId (store IPv4, port and commit-log
 * offset, upper-case hex). All integers are in the machine's byte order, as Arrow reads them.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FIXED_BYTES 88 /* TOTALSIZE .. BODYLEN of a record with IPv4 hosts */
#define MAGIC_CODE ((int32_t)0xDAA320A7) /* MESSAGE_MAGIC_CODE of protocol/message_codec.py */
#define SYS_FLAG_COMPRESSED 0x1
#define SYS_FLAG_BORNHOST_V6 (1 << 4)
#define SYS_FLAG_STOREHOST_V6 (1 << 5)
#define NAME_VALUE 0x01
#define SEPARATOR 0x02
#define MSG_ID_CHARS 32
#define OFFSET_LIMIT INT32_MAX

static int32_t
read_int(const unsigned char *p)
{
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3]);
}

static int64_t
read_long(const unsigned char *p)
{
    return (int64_t)(((uint64_t)(uint32_t)read_int(p) << 32) | (uint64_t)(uint32_t)read_int(p + 4));
}

/* A growable byte buffer. */
typedef struct {
    char *data;
    size_t length;
    size_t capacity;
} Buf;

static int
buf_reserve(Buf *buf, size_t more)
{
    if (buf->length + more <= buf->capacity) {
        return 0;
    }
    size_t capacity = buf->capacity ? buf->capacity : 256;
    while (capacity < buf->length + more) {
        capacity *= 2;
    }
    char *data = realloc(buf->data, capacity);
    if (data == NULL) {
        return -1;
    }
    buf->data = data;
    buf->capacity = capacity;
    return 0;
}

static int
buf_append(Buf *buf, const void *data, size_t length)
{
    if (buf_reserve(buf, length) < 0) {
        return -1;
    }
    if (length) {
        memcpy(buf->data + buf->length, data, length);
    }
    buf->length += length;
    return 0;
}

static int
buf_offset(Buf *offsets, size_t position)
{
    int32_t value = (int32_t)position;
    return position > OFFSET_LIMIT ? -1 : buf_append(offsets, &value, sizeof value);
}

/* A string column: offsets, data and (for the looked-up columns) validity. */
typedef struct {
    Buf offsets;
    Buf data;
    Buf validity;
    Py_ssize_t null_count;
} Column;

static int
column_push(Column *column, const unsigned char *value, Py_ssize_t length, Py_ssize_t row, int track_nulls)
{
    if (track_nulls) {
        if (row % 8 == 0 && buf_append(&column->validity, "\0", 1) < 0) {
            return -1;
        }
        if (value != NULL) {
            column->validity.data[row / 8] |= (char)(1 << (row % 8));
        } else {
            column->null_count++;
        }
    }
    if (value != NULL && buf_append(&column->data, value, (size_t)length) < 0) {
        return -1;
    }
    return buf_offset(&column->offsets, column->data.length);
}

static void
column_free(Column *column)
{
    free(column->offsets.data);
    free(column->data.data);
    free(column->validity.data);
}

static PyObject *
bytes_of(const Buf *buf)
{
    return PyBytes_FromStringAndSize(buf->length ? buf->data : "", (Py_ssize_t)buf->length);
}

/* The span of the last item named key (key_length bytes) among props' items, or NULL. */
typedef struct {
    const unsigned char *name;
    Py_ssize_t length;
    const unsigned char *value;
    Py_ssize_t value_length;
} Lookup;

enum { TAGS, KEYS, UNIQ_KEY, LOOKUPS };

static const char *const LOOKUP_NAMES[LOOKUPS] = {"TAGS", "KEYS", "UNIQ_KEY"};

/* Columns of the records; the pass fills them, the tuple is built from them. */
typedef struct {
    Buf queue_id, queue_offset, born_us, store_us, reconsume_times;
    Column body, topic, msg_id, tags, keys;
    Buf map_offsets;
    Column prop_keys, prop_values;
} Columns;

static void
columns_free(Columns *c)
{
    free(c->queue_id.data);
    free(c->queue_offset.data);
    free(c->born_us.data);
    free(c->store_us.data);
    free(c->reconsume_times.data);
    column_free(&c->body);
    column_free(&c->topic);
    column_free(&c->msg_id);
    column_free(&c->tags);
    column_free(&c->keys);
    free(c->map_offsets.data);
    column_free(&c->prop_keys);
    column_free(&c->prop_values);
}

/* Split one property string into items; -1 on memory error. */
static int
add_properties(Columns *c, const unsigned char *p, Py_ssize_t n, Lookup *found)
{
    for (int k = 0; k < LOOKUPS; k++) {
        found[k].value = NULL;
    }
    Py_ssize_t item = 0;
    while (item < n) {
        const unsigned char *stop = memchr(p + item, SEPARATOR, (size_t)(n - item));
        Py_ssize_t item_end = stop ? stop - p : n;
        const unsigned char *split = memchr(p + item, NAME_VALUE, (size_t)(item_end - item));
        if (split != NULL) {
            Py_ssize_t key_length = split - (p + item);
            const unsigned char *value = split + 1;
            Py_ssize_t value_length = (p + item_end) - value;
            if (buf_append(&c->prop_keys.data, p + item, (size_t)key_length) < 0
                || buf_offset(&c->prop_keys.offsets, c->prop_keys.data.length) < 0
                || buf_append(&c->prop_values.data, value, (size_t)value_length) < 0
                || buf_offset(&c->prop_values.offsets, c->prop_values.data.length) < 0) {
                return -1;
            }
            for (int k = 0; k < LOOKUPS; k++) {
                if (key_length == found[k].length && memcmp(p + item, found[k].name, (size_t)key_length) == 0) {
                    found[k].value = value;
                    found[k].value_length = value_length;
                }
            }
        }
        item = item_end + 1;
    }
    return buf_offset(&c->map_offsets, c->prop_keys.offsets.length / sizeof(int32_t) - 1);
}

static const char HEX[] = "0123456789ABCDEF";

static int
add_record(Columns *c, const unsigned char *r, Py_ssize_t total_size, Py_ssize_t row, Lookup *found)
{
    int32_t queue_id = read_int(r + 12);
    int64_t queue_offset = read_long(r + 20);
    int64_t born_us = read_long(r + 40) * 1000;
    int64_t store_us = read_long(r + 56) * 1000;
    int32_t reconsume_times = read_int(r + 72);
    int32_t body_length = read_int(r + 84);
    const unsigned char *topic = r + FIXED_BYTES + body_length + 1;
    Py_ssize_t topic_length = topic[-1];
    const unsigned char *props = topic + topic_length + 2;
    Py_ssize_t props_length = (Py_ssize_t)((props[-2] << 8) | props[-1]);
    if (buf_append(&c->queue_id, &queue_id, sizeof queue_id) < 0
        || buf_append(&c->queue_offset, &queue_offset, sizeof queue_offset) < 0
        || buf_append(&c->born_us, &born_us, sizeof born_us) < 0
        || buf_append(&c->store_us, &store_us, sizeof store_us) < 0
        || buf_append(&c->reconsume_times, &reconsume_times, sizeof reconsume_times) < 0
        || column_push(&c->body, r + FIXED_BYTES, body_length, row, 0) < 0
        || column_push(&c->topic, topic, topic_length, row, 0) < 0
        || add_properties(c, props, props_length, found) < 0
        || column_push(&c->tags, found[TAGS].value, found[TAGS].value_length, row, 1) < 0
        || column_push(&c->keys, found[KEYS].value, found[KEYS].value_length, row, 1) < 0) {
        return -1;
    }
    if (found[UNIQ_KEY].value != NULL) {
        return column_push(&c->msg_id, found[UNIQ_KEY].value, found[UNIQ_KEY].value_length, row, 0);
    }
    /* offsetMsgId: store IPv4 (4 bytes), store port (4), commit-log offset (8), as hex. */
    unsigned char raw[16], text[MSG_ID_CHARS];
    memcpy(raw, r + 64, 4);
    memcpy(raw + 4, r + 68, 4);
    memcpy(raw + 8, r + 28, 8);
    for (int i = 0; i < 16; i++) {
        text[2 * i] = (unsigned char)HEX[raw[i] >> 4];
        text[2 * i + 1] = (unsigned char)HEX[raw[i] & 0xF];
    }
    return column_push(&c->msg_id, text, MSG_ID_CHARS, row, 0);
}

/* 1 when every record of data tiles it and is one this module takes; counts the records. */
static int
plain_records(const unsigned char *data, Py_ssize_t length, Py_ssize_t *count, Py_ssize_t *body_bytes)
{
    Py_ssize_t position = 0;
    *count = 0;
    *body_bytes = 0;
    while (position < length) {
        if (length - position < FIXED_BYTES) {
            return 0;
        }
        const unsigned char *r = data + position;
        int32_t total_size = read_int(r);
        int32_t sys_flag = read_int(r + 36);
        int32_t body_length = read_int(r + 84);
        if (total_size <= FIXED_BYTES || total_size > length - position || read_int(r + 4) != MAGIC_CODE
            || (sys_flag & (SYS_FLAG_COMPRESSED | SYS_FLAG_BORNHOST_V6 | SYS_FLAG_STOREHOST_V6))
            || body_length < 0 || body_length >= total_size - FIXED_BYTES) {
            return 0;
        }
        Py_ssize_t topic_at = FIXED_BYTES + body_length;
        Py_ssize_t props_at = topic_at + 1 + r[topic_at] + 2;
        if (props_at > total_size || props_at + ((r[props_at - 2] << 8) | r[props_at - 1]) != total_size) {
            return 0;
        }
        position += total_size;
        *body_bytes += body_length;
        (*count)++;
    }
    return 1;
}

static PyObject *
column_tuple(const Column *column, int with_nulls)
{
    if (with_nulls) {
        return Py_BuildValue("(NNNn)", bytes_of(&column->offsets), bytes_of(&column->data),
                             bytes_of(&column->validity), column->null_count);
    }
    return Py_BuildValue("(NN)", bytes_of(&column->offsets), bytes_of(&column->data));
}

static PyObject *
record_columns(PyObject *module, PyObject *arg)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    const unsigned char *data = view.buf;
    Py_ssize_t length = view.len, count = 0, body_bytes = 0;
    if (length == 0 || length > OFFSET_LIMIT || !plain_records(data, length, &count, &body_bytes)) {
        PyBuffer_Release(&view);
        Py_RETURN_NONE;
    }
    Columns c;
    memset(&c, 0, sizeof c);
    /* Every buffer gets its final size (or, for text, a bound) up front: no growth in the pass. */
    size_t rows = (size_t)count, text_bound = (size_t)(length - body_bytes);
    Buf *fixed_int[] = {&c.queue_id, &c.reconsume_times};
    Buf *fixed_long[] = {&c.queue_offset, &c.born_us, &c.store_us};
    Buf *row_offsets[] = {&c.body.offsets, &c.topic.offsets, &c.msg_id.offsets, &c.tags.offsets,
                          &c.keys.offsets, &c.map_offsets};
    int failed = 0;
    for (size_t i = 0; i < sizeof fixed_int / sizeof *fixed_int; i++) {
        failed |= buf_reserve(fixed_int[i], rows * sizeof(int32_t));
    }
    for (size_t i = 0; i < sizeof fixed_long / sizeof *fixed_long; i++) {
        failed |= buf_reserve(fixed_long[i], rows * sizeof(int64_t));
    }
    for (size_t i = 0; i < sizeof row_offsets / sizeof *row_offsets; i++) {
        failed |= buf_reserve(row_offsets[i], (rows + 1) * sizeof(int32_t));
    }
    failed |= buf_reserve(&c.body.data, (size_t)body_bytes) | buf_reserve(&c.topic.data, text_bound)
        | buf_reserve(&c.msg_id.data, rows * MSG_ID_CHARS) | buf_reserve(&c.prop_keys.data, text_bound)
        | buf_reserve(&c.prop_values.data, text_bound) | buf_reserve(&c.tags.validity, rows / 8 + 1)
        | buf_reserve(&c.keys.validity, rows / 8 + 1);
    Lookup found[LOOKUPS];
    for (int k = 0; k < LOOKUPS; k++) {
        found[k].name = (const unsigned char *)LOOKUP_NAMES[k];
        found[k].length = (Py_ssize_t)strlen(LOOKUP_NAMES[k]);
    }
    failed = failed || buf_offset(&c.body.offsets, 0) < 0 || buf_offset(&c.topic.offsets, 0) < 0
        || buf_offset(&c.msg_id.offsets, 0) < 0 || buf_offset(&c.tags.offsets, 0) < 0
        || buf_offset(&c.keys.offsets, 0) < 0 || buf_offset(&c.map_offsets, 0) < 0
        || buf_offset(&c.prop_keys.offsets, 0) < 0 || buf_offset(&c.prop_values.offsets, 0) < 0;
    Py_BEGIN_ALLOW_THREADS
    Py_ssize_t position = 0;
    for (Py_ssize_t row = 0; !failed && row < count; row++) {
        Py_ssize_t total_size = read_int(data + position);
        failed = add_record(&c, data + position, total_size, row, found) < 0;
        position += total_size;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    PyObject *result = NULL;
    if (failed) {
        PyErr_NoMemory();
    } else {
        result = Py_BuildValue(
            "(nNNNNNNNNNNNNN)", count, bytes_of(&c.queue_id), bytes_of(&c.reconsume_times),
            bytes_of(&c.queue_offset), bytes_of(&c.born_us), bytes_of(&c.store_us), column_tuple(&c.body, 0),
            column_tuple(&c.topic, 0), column_tuple(&c.msg_id, 0), bytes_of(&c.map_offsets),
            column_tuple(&c.prop_keys, 0), column_tuple(&c.prop_values, 0), column_tuple(&c.tags, 1),
            column_tuple(&c.keys, 1));
    }
    columns_free(&c);
    return result;
}

static PyMethodDef methods[] = {
    {"record_columns", (PyCFunction)record_columns, METH_O,
     "record_columns(body) -> None | tuple of column buffers; see spark/_arrow_records.py."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "orbitmq.spark._record_columns",
    "A pull body's stored records as Arrow column buffers (see spark/_arrow_records.py).",
    -1,
    methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC
PyInit__record_columns(void)
{
    return PyModule_Create(&module_def);
}
