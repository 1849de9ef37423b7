// SPDX-License-Identifier: Apache-2.0
/*
 * ufo-workload: a small latency-critical service for UFO test guests.
 *
 * Requests arrive as a Poisson process whose rate changes by phases; worker
 * threads serve each one by spinning for the service time; every report
 * interval the program prints the interval's request latency percentiles
 * (arrival to completion, so queueing is included) on stdout:
 *
 *   UFO-WL t=<s> phase=<i> rate=<rps> arrivals=<n> done=<n> dropped=<n>
 *          backlog=<n> p50_us=<x> p95_us=<x> p99_us=<x> max_us=<x>
 *
 * Settings, read from /proc/cmdline (ufo.KEY=VALUE) and then from the
 * arguments (KEY=VALUE):
 *   rate=R:S[,R:S...]  phases of R requests/s lasting S seconds; the last
 *                      phase lasts forever unless loop=1 (default 200:0)
 *   svc_us=N           service time in microseconds (default 500)
 *   workers=N          worker threads (default 4)
 *   report_ms=N        report interval (default 1000)
 *   loop=0|1           restart at the first phase after the last one
 *   duration=S         exit after S seconds (default 0: run forever)
 *   batch=0|1          a best-effort batch job instead: no arrivals, every
 *                      worker computes one unit of work after another;
 *                      done= counts the units of the interval, latencies
 *                      are 0
 *   unit=N             iterations of arithmetic in one unit of batch work
 *                      (default 100000). Work, not time: a spin for svc_us
 *                      ends on the guest's clock, which runs on while the
 *                      host does not run the vCPU, so it would count time
 *                      the guest did not get
 *   publish=P          after every report, write the interval's P-th
 *                      percentile latency (us, 1..10000000) to the
 *                      ufo_guest module's /sys/kernel/ufo/latency_us, and
 *                      add published_us=<x> to the report line (0: none
 *                      written); default 0: off
 *   latency_path=F     where publish= writes (default the module's file)
 */

#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_PHASES 64
#define QUEUE_LEN 65536
#define LAT_LEN (1 << 18)
#define LATENCY_PATH "/sys/kernel/ufo/latency_us"
#define LATENCY_MAX_US 10000000u

struct phase {
	double rate;
	double seconds;
};

static struct phase phases[MAX_PHASES] = { { 200.0, 0.0 } };
static int nphases = 1;
static long svc_us = 500;
static int nworkers = 4;
static long report_ms = 1000;
static int loop_phases;
static double duration;
static int batch;
static long unit_iters = 100000;
static double publish_pct;
static char latency_path[256] = LATENCY_PATH;
static volatile uint64_t sink;

static pthread_mutex_t qlock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t qcond = PTHREAD_COND_INITIALIZER;
static uint64_t queue[QUEUE_LEN];
static unsigned long qhead, qtail;
static unsigned long arrivals, dropped;

static pthread_mutex_t slock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t *lat, *lat_spare;
static unsigned long nlat, ndone;

static volatile int cur_phase;
static volatile double cur_rate;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static void sleep_until(uint64_t t)
{
	struct timespec ts = { t / 1000000000ull, t % 1000000000ull };

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) ==
	       EINTR)
		;
}

static void parse_rate(const char *s)
{
	char buf[1024], *tok, *save = NULL;
	int n = 0;

	snprintf(buf, sizeof(buf), "%s", s);
	for (tok = strtok_r(buf, ",", &save); tok && n < MAX_PHASES;
	     tok = strtok_r(NULL, ",", &save)) {
		char *colon = strchr(tok, ':');

		phases[n].rate = atof(tok);
		phases[n].seconds = colon ? atof(colon + 1) : 0.0;
		if (phases[n].rate < 0)
			phases[n].rate = 0;
		n++;
	}
	if (n)
		nphases = n;
}

static void set_option(const char *kv)
{
	const char *v = strchr(kv, '=');
	size_t klen;

	if (!v)
		return;
	klen = v - kv;
	v++;
	if (klen == 4 && !strncmp(kv, "rate", 4))
		parse_rate(v);
	else if (klen == 6 && !strncmp(kv, "svc_us", 6))
		svc_us = atol(v);
	else if (klen == 7 && !strncmp(kv, "workers", 7))
		nworkers = atoi(v);
	else if (klen == 9 && !strncmp(kv, "report_ms", 9))
		report_ms = atol(v);
	else if (klen == 4 && !strncmp(kv, "loop", 4))
		loop_phases = atoi(v);
	else if (klen == 8 && !strncmp(kv, "duration", 8))
		duration = atof(v);
	else if (klen == 5 && !strncmp(kv, "batch", 5))
		batch = atoi(v);
	else if (klen == 4 && !strncmp(kv, "unit", 4))
		unit_iters = atol(v);
	else if (klen == 7 && !strncmp(kv, "publish", 7))
		publish_pct = atof(v);
	else if (klen == 12 && !strncmp(kv, "latency_path", 12))
		snprintf(latency_path, sizeof(latency_path), "%s", v);
}

static void read_cmdline(void)
{
	char buf[4096], *tok, *save = NULL;
	FILE *f = fopen("/proc/cmdline", "r");

	if (!f)
		return;
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = 0;
	fclose(f);
	for (tok = strtok_r(buf, " \n", &save); tok;
	     tok = strtok_r(NULL, " \n", &save))
		if (!strncmp(tok, "ufo.", 4))
			set_option(tok + 4);
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static double uniform(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return ((rng >> 11) + 1.0) / 9007199254740993.0;
}

static void *generator(void *arg)
{
	uint64_t start = now_ns(), phase_start = start, t = start;
	int p = 0;

	(void)arg;
	for (;;) {
		double rate = phases[p].rate;
		uint64_t end = phases[p].seconds > 0 ?
			phase_start + (uint64_t)(phases[p].seconds * 1e9) :
			UINT64_MAX;

		cur_phase = p;
		cur_rate = rate;
		if (rate <= 0) {
			t = end;
			if (end == UINT64_MAX)
				t = now_ns() + 3600ull * 1000000000ull;
			sleep_until(t);
		} else {
			t += (uint64_t)(-log(uniform()) / rate * 1e9);
			if (t < end) {
				sleep_until(t);
				pthread_mutex_lock(&qlock);
				arrivals++;
				if (qtail - qhead < QUEUE_LEN)
					queue[qtail++ % QUEUE_LEN] = t;
				else
					dropped++;
				pthread_cond_signal(&qcond);
				pthread_mutex_unlock(&qlock);
				continue;
			}
			t = end;
		}
		if (t < end)
			continue;
		phase_start = end;
		if (p + 1 < nphases)
			p++;
		else if (loop_phases)
			p = 0;
	}
	return NULL;
}

static void spin(void)
{
	uint64_t spin_end = now_ns() + (uint64_t)svc_us * 1000;

	while (now_ns() < spin_end)
		;
}

/* Batch: work with no queue and no latency, only a count of work done. */
static void *batch_worker(void *arg)
{
	uint64_t x = (uintptr_t)arg;
	long i;

	for (;;) {
		for (i = 0; i < unit_iters; i++)
			x = x * 6364136223846793005ull + 1442695040888963407ull;
		sink = x;
		pthread_mutex_lock(&slock);
		ndone++;
		pthread_mutex_unlock(&slock);
	}
	return NULL;
}

static void *worker(void *arg)
{
	uint64_t arrival, done;

	(void)arg;
	for (;;) {
		pthread_mutex_lock(&qlock);
		while (qhead == qtail)
			pthread_cond_wait(&qcond, &qlock);
		arrival = queue[qhead++ % QUEUE_LEN];
		pthread_mutex_unlock(&qlock);

		spin();
		done = now_ns();
		pthread_mutex_lock(&slock);
		if (nlat < LAT_LEN)
			lat[nlat++] = (uint32_t)((done - arrival) / 1000 > UINT32_MAX ?
				UINT32_MAX : (done - arrival) / 1000);
		ndone++;
		pthread_mutex_unlock(&slock);
	}
	return NULL;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static uint32_t pct(uint32_t *v, unsigned long n, double p)
{
	unsigned long i;

	if (!n)
		return 0;
	i = (unsigned long)(p * (n - 1) + 0.5);
	return v[i];
}

/*
 * Writes one latency report; returns the value written, 0 when none was
 * (no requests done, or no module file). The first failure is printed.
 */
static uint32_t publish_latency(uint32_t us)
{
	static int warned;
	FILE *f;

	if (!us)
		return 0;
	if (us > LATENCY_MAX_US)
		us = LATENCY_MAX_US;
	f = fopen(latency_path, "w");
	if (!f || fprintf(f, "%u\n", us) < 0 || fclose(f)) {
		if (!warned++)
			printf("UFO-WL publish failed: %s\n", strerror(errno));
		return 0;
	}
	return us;
}

int main(int argc, char **argv)
{
	pthread_t gen, *workers;
	uint64_t start, next;
	unsigned long n, done, arr, drop, backlog;
	uint32_t *v, published;
	int i;

	read_cmdline();
	for (i = 1; i < argc; i++)
		set_option(argv[i]);
	if (nworkers < 1)
		nworkers = 1;
	if (nworkers > 256)
		nworkers = 256;
	if (report_ms < 10)
		report_ms = 10;
	if (unit_iters < 1)
		unit_iters = 1;
	if (svc_us < 0)
		svc_us = 0;
	if (!(publish_pct > 0 && publish_pct <= 100))
		publish_pct = 0;
	lat = calloc(LAT_LEN, sizeof(*lat));
	lat_spare = calloc(LAT_LEN, sizeof(*lat));
	workers = calloc(nworkers, sizeof(*workers));
	if (!lat || !lat_spare || !workers)
		return 1;
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("UFO-WL start phases=%d workers=%d svc_us=%ld report_ms=%ld "
	       "batch=%d\n", nphases, nworkers, svc_us, report_ms, batch);
	for (i = 0; i < nworkers; i++)
		pthread_create(&workers[i], NULL, batch ? batch_worker : worker,
			       (void *)(uintptr_t)i);
	if (!batch)
		pthread_create(&gen, NULL, generator, NULL);

	start = now_ns();
	next = start;
	for (;;) {
		next += (uint64_t)report_ms * 1000000ull;
		sleep_until(next);
		pthread_mutex_lock(&slock);
		v = lat;
		n = nlat;
		lat = lat_spare;
		lat_spare = v;
		nlat = 0;
		done = ndone;
		ndone = 0;
		pthread_mutex_unlock(&slock);
		pthread_mutex_lock(&qlock);
		arr = arrivals;
		drop = dropped;
		arrivals = 0;
		dropped = 0;
		backlog = qtail - qhead;
		pthread_mutex_unlock(&qlock);
		qsort(v, n, sizeof(*v), cmp_u32);
		published = 0;
		if (publish_pct > 0 && !batch)
			published = publish_latency(pct(v, n, publish_pct / 100));
		printf("UFO-WL t=%.1f phase=%d rate=%.0f arrivals=%lu done=%lu dropped=%lu backlog=%lu p50_us=%u p95_us=%u p99_us=%u max_us=%u",
		       (next - start) / 1e9, cur_phase, cur_rate, arr, done,
		       drop, backlog, pct(v, n, 0.50), pct(v, n, 0.95),
		       pct(v, n, 0.99), n ? v[n - 1] : 0);
		if (publish_pct > 0)
			printf(" published_us=%u", published);
		printf("\n");
		if (duration > 0 && (next - start) / 1e9 >= duration)
			return 0;
	}
}
