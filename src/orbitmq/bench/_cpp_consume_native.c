/*
 * Child process of `bench consume --compare-defaults`: the real RocketMQ C++ PushConsumer
 * (librocketmq.so from PyPI's rocketmq wheel) with a C callback, so that the figure is the
 * client's and not its Python binding's. Compiled by orbitmq.bench._consume_defaults at run
 * time with the system C compiler, linked against the wheel's library; the same output as
 * orbitmq.bench._cpp_consume: one JSON line {"count", "started", "first", "last", "cpu_s"}.
 *
 * usage: cpp_consume_native NAMESRV TOPIC GROUP COUNT TIMEOUT_S
 *
 * Every consumer setting is the C++ client's default (pull batches of 32, one message per
 * callback, its own thread count); the callback only counts.
 */
#define _DEFAULT_SOURCE
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

typedef struct CPushConsumer CPushConsumer;
typedef struct CMessageExt CMessageExt;
typedef int (*MessageCallBack)(CPushConsumer *, CMessageExt *);

extern CPushConsumer *CreatePushConsumer(const char *group_id);
extern int DestroyPushConsumer(CPushConsumer *consumer);
extern int StartPushConsumer(CPushConsumer *consumer);
extern int ShutdownPushConsumer(CPushConsumer *consumer);
extern int SetPushConsumerNameServerAddress(CPushConsumer *consumer, const char *namesrv);
extern int Subscribe(CPushConsumer *consumer, const char *topic, const char *expression);
extern int RegisterMessageCallback(CPushConsumer *consumer, MessageCallBack callback);

static atomic_long received;
static long goal;
static _Atomic double first_s, last_s;
static atomic_int done;

static double monotonic_s(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + (double)now.tv_nsec / 1e9;
}

static int on_message(CPushConsumer *consumer, CMessageExt *message) {
    (void)consumer;
    (void)message;
    long seen = atomic_fetch_add(&received, 1) + 1;
    if (seen == 1) {
        atomic_store(&first_s, monotonic_s());
    }
    if (seen == goal) {
        atomic_store(&last_s, monotonic_s());
        atomic_store(&done, 1);
    }
    return 0; /* CONSUME_SUCCESS */
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: %s NAMESRV TOPIC GROUP COUNT TIMEOUT_S\n", argv[0]);
        return 2;
    }
    goal = atol(argv[4]);
    double timeout_s = atof(argv[5]);
    double started = monotonic_s();
    CPushConsumer *consumer = CreatePushConsumer(argv[3]);
    if (consumer == NULL || SetPushConsumerNameServerAddress(consumer, argv[1]) != 0 ||
        Subscribe(consumer, argv[2], "*") != 0 || RegisterMessageCallback(consumer, on_message) != 0 ||
        StartPushConsumer(consumer) != 0) {
        fprintf(stderr, "the C++ push consumer did not start\n");
        return 1;
    }
    while (!atomic_load(&done) && monotonic_s() - started < timeout_s) {
        usleep(1000);
    }
    long count = atomic_load(&received);
    double last = atomic_load(&done) ? atomic_load(&last_s) : monotonic_s();
    if (count > goal) {
        count = goal;
    }
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    double cpu_s = (double)usage.ru_utime.tv_sec + usage.ru_utime.tv_usec / 1e6 +
                   (double)usage.ru_stime.tv_sec + usage.ru_stime.tv_usec / 1e6;
    ShutdownPushConsumer(consumer);
    DestroyPushConsumer(consumer);
    printf("{\"count\": %ld, \"started\": %.6f, \"first\": %.6f, \"last\": %.6f, \"cpu_s\": %.6f}\n", count,
           started, atomic_load(&first_s), last, cpu_s);
    fflush(stdout);
    return 0;
}
