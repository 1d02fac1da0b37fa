// SPDX-License-Identifier: GPL-2.0
/*
 * tdescope's wait tracer: every syscall of one process (all its threads, later ones too), timed from
 * enter to exit and sized, plus its threads' off-CPU time, aggregated here in the kernel.
 *
 * Raw tracepoints (sys_enter, sys_exit, sched_switch) need no tracefs, which is not mounted at boot on
 * these machines. The first thing each program does is compare the caller's tgid with the one target
 * (a read-only constant, so the verifier folds it): other processes pay one compare.
 *
 * Per (syscall, flags, size) a per-CPU histogram counts calls, total and longest time and log2
 * latency buckets; the workbench reads and sums the maps once a second (app/waits/ebpf/tracer.py),
 * so the cost does not grow with the syscall rate. No record goes out per call, except a bounded
 * sample for the timeline (calls of at least span_min_ns, at most span_max_per_s a second).
 * Sizes are exact for I/O, the network and memory operations (mmap's length is Oracle's 'PGA memory
 * operation' p1); only when the map is full does a new size fall back to its log2 bucket.
 * read/write say whether their fd is a file, a socket or a pipe. The program reads only: syscall
 * arguments and a few kernel fields (task, fd table, inode mode).
 *
 * Build: clang -O2 -g -target bpf -D__TARGET_ARCH_x86 -I/usr/include/x86_64-linux-gnu
 *        -c waits.bpf.c -o waits.bpf.o   (no kernel headers, no vmlinux.h; CO-RE for kernel fields)
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <asm/ptrace.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "GPL";

#define LAT_BUCKETS 40      /* bucket i: durations with floor(log2(ns)) == i; the last takes the rest */
#define SLOTS 65536         /* in-flight calls, one slot per thread id modulo SLOTS */
#define SIZE_LOG2 (1ULL << 63)  /* key.size holds floor(log2(bytes)) + 1, not the bytes */

/* Pseudo syscall numbers for off-CPU time (sched_switch). */
#define NR_CPU_QUEUE 1000   /* switched out runnable (preempted): waiting for a CPU */
#define NR_BLOCKED 1001     /* switched out sleeping: blocked, whatever in */

/* The whole .rodata, set by the workbench before load (tracer.py packs the same layout): the target,
 * and the timeline's sample (calls at least span_min_ns long, at most span_max_per_s a second). */
const volatile struct {
    __u32 target_tgid;
    __u32 span_max_per_s;
    __u64 span_min_ns;
} cfg = {};
#define target_tgid cfg.target_tgid
#define span_max_per_s cfg.span_max_per_s
#define span_min_ns cfg.span_min_ns

struct key {
    __u32 nr;
    __u32 flags;     /* MAP_* of mmap/mremap, MADV_* of madvise, FD_* of read/write */
    __u64 size;      /* bytes, or SIZE_LOG2 | bucket */
};

struct agg {
    __u64 count;
    __u64 total_ns;
    __u64 max_ns;
    __u64 lat[LAT_BUCKETS];
};

struct inflight {
    __u64 ts;
    __u64 size;
    __u32 nr;
    __u32 tid;
    __u32 flags;
    __u32 pad;
};

struct offcpu {
    __u64 ts;
    __u32 tid;
    __u32 runnable;
};

/* One sampled call (or off-CPU interval), for the timeline. */
struct span {
    __u64 start_ns;
    __u64 dur_ns;
    __u64 size;
    __u32 tid;
    __u32 nr;
    __u32 flags;
    __u32 pad;
};

enum stat {
    S_CALLS,         /* unused: the workbench sums the histograms' counts */
    S_NO_ROOM,       /* a new (syscall, flags, size) found the histogram map full */
    S_UNMATCHED,     /* an exit whose entry was not seen (attached mid-call, or slot reused) */
    S_SWITCHES,      /* off-CPU intervals timed */
    S_SPANS_OUT,     /* sampled spans that found no room in the ring */
    S_NSTATS,
};

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_HASH);
    __uint(max_entries, 16384);
    __type(key, struct key);
    __type(value, struct agg);
} aggs SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, SLOTS);
    __type(key, __u32);
    __type(value, struct inflight);
} calls SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, SLOTS);
    __type(key, __u32);
    __type(value, struct offcpu);
} offcpu SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, S_NSTATS);
    __type(key, __u32);
    __type(value, __u64);
} stats SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_RINGBUF);
    __uint(max_entries, 256 * 1024);
} spans SEC(".maps");

/* The target's last program break, to size brk() calls by their change. */
__u64 last_brk = 0;
/* The current second of the span sample, and spans sent in it (approximate across CPUs: a bound). */
__u64 span_second = 0;
__u32 span_count = 0;

/* The kernel fields read, located at load time from the kernel's BTF (CO-RE): no kernel headers. */
struct inode {
    unsigned short i_mode;
} __attribute__((preserve_access_index));

struct file {
    struct inode *f_inode;
} __attribute__((preserve_access_index));

struct fdtable {
    unsigned int max_fds;
    struct file **fd;
} __attribute__((preserve_access_index));

struct files_struct {
    struct fdtable *fdt;
} __attribute__((preserve_access_index));

struct task_struct {
    int pid;
    int tgid;
    unsigned int __state;
    struct files_struct *files;
} __attribute__((preserve_access_index));

/* What read/write's fd is, in key.flags: a socket is the network, a pipe is idle (a worker waiting). */
#define FD_FILE 0
#define FD_SOCKET 1
#define FD_PIPE 2

static __always_inline __u32 fd_kind(unsigned long fd)
{
    struct task_struct *task = (struct task_struct *)bpf_get_current_task();
    struct fdtable *fdt = BPF_CORE_READ(task, files, fdt);
    if (!fdt || fd >= BPF_CORE_READ(fdt, max_fds))
        return FD_FILE;
    struct file **fds = BPF_CORE_READ(fdt, fd);
    struct file *f = 0;
    bpf_probe_read_kernel(&f, sizeof(f), &fds[fd]);
    if (!f)
        return FD_FILE;
    unsigned short mode = BPF_CORE_READ(f, f_inode, i_mode) & 0170000;
    if (mode == 0140000)
        return FD_SOCKET;
    if (mode == 0010000)
        return FD_PIPE;
    return FD_FILE;
}

static __always_inline void bump(__u32 which)
{
    __u64 *v = bpf_map_lookup_elem(&stats, &which);
    if (v)
        *v += 1;
}

static __always_inline __u32 log2_u64(__u64 v)
{
    __u32 r = 0;
    if (v >> 32) { v >>= 32; r += 32; }
    if (v >> 16) { v >>= 16; r += 16; }
    if (v >> 8) { v >>= 8; r += 8; }
    if (v >> 4) { v >>= 4; r += 4; }
    if (v >> 2) { v >>= 2; r += 2; }
    if (v >> 1) { r += 1; }
    return r;
}

static __always_inline struct agg *slot_of(struct key *k)
{
    struct agg *a = bpf_map_lookup_elem(&aggs, k);
    if (a)
        return a;
    struct agg zero = {};
    bpf_map_update_elem(&aggs, k, &zero, BPF_NOEXIST);
    return bpf_map_lookup_elem(&aggs, k);
}

static __always_inline void account(struct key *k, __u64 ns)
{
    struct agg *a = slot_of(k);
    if (!a && k->size && !(k->size & SIZE_LOG2)) {
        /* the map is full of exact sizes: fall back to the size's log2 bucket (few keys) */
        k->size = SIZE_LOG2 | (log2_u64(k->size) + 1);
        a = slot_of(k);
    }
    if (!a) {
        bump(S_NO_ROOM);
        return;
    }
    __u32 b = log2_u64(ns);
    if (b >= LAT_BUCKETS)
        b = LAT_BUCKETS - 1;
    a->count += 1;
    a->total_ns += ns;
    if (ns > a->max_ns)
        a->max_ns = ns;
    a->lat[b] += 1;
}

static __always_inline void sample_span(struct key *k, __u64 start, __u64 ns, __u32 tid)
{
    if (ns < span_min_ns)
        return;
    __u64 second = (start + ns) / 1000000000ULL;
    if (second != span_second) {
        span_second = second;
        span_count = 0;
    }
    if (span_count >= span_max_per_s)
        return;
    __sync_fetch_and_add(&span_count, 1);  /* a race may let a CPU or two over the bound: still a bound */
    struct span sp = {.start_ns = start, .dur_ns = ns, .size = k->size, .tid = tid, .nr = k->nr,
                      .flags = k->flags};
    if (bpf_ringbuf_output(&spans, &sp, sizeof(sp), BPF_RB_NO_WAKEUP))
        bump(S_SPANS_OUT);
}

/* x86-64 syscall numbers (asm/unistd_64.h) of the calls sized here. */
enum {
    NR_read = 0, NR_write = 1, NR_mmap = 9, NR_munmap = 11, NR_brk = 12, NR_pread64 = 17,
    NR_pwrite64 = 18, NR_readv = 19, NR_writev = 20, NR_mremap = 25, NR_madvise = 28,
    NR_sendto = 44, NR_recvfrom = 45, NR_sendmsg = 46, NR_recvmsg = 47, NR_preadv = 295,
    NR_pwritev = 296,
};

SEC("raw_tracepoint/sys_enter")
int on_sys_enter(struct bpf_raw_tracepoint_args *ctx)
{
    __u64 id = bpf_get_current_pid_tgid();
    if ((__u32)(id >> 32) != target_tgid)
        return 0;
    __u32 tid = (__u32)id, slot = tid & (SLOTS - 1);
    struct inflight *f = bpf_map_lookup_elem(&calls, &slot);
    if (!f)
        return 0;
    __u32 nr = (__u32)ctx->args[1];
    __u64 size = 0;
    __u32 flags = 0;
    if (nr == NR_read || nr == NR_write || nr == NR_readv || nr == NR_writev) {
        struct pt_regs *regs = (struct pt_regs *)ctx->args[0];
        unsigned long fd = 0;
        bpf_probe_read_kernel(&fd, sizeof(fd), &regs->rdi);
        flags = fd_kind(fd);
    } else if (nr == NR_mmap || nr == NR_munmap || nr == NR_madvise || nr == NR_mremap) {
        struct pt_regs *regs = (struct pt_regs *)ctx->args[0];
        unsigned long a1 = 0, a2 = 0, a3 = 0;
        bpf_probe_read_kernel(&a1, sizeof(a1), &regs->rsi);
        if (nr == NR_mmap) {
            bpf_probe_read_kernel(&a3, sizeof(a3), &regs->r10);
            size = a1;
            flags = (__u32)a3;
        } else if (nr == NR_munmap) {
            size = a1;
        } else if (nr == NR_madvise) {
            bpf_probe_read_kernel(&a2, sizeof(a2), &regs->rdx);
            size = a1;
            flags = (__u32)a2;
        } else {  /* mremap(old, old_len, new_len, flags) */
            bpf_probe_read_kernel(&a2, sizeof(a2), &regs->rdx);
            bpf_probe_read_kernel(&a3, sizeof(a3), &regs->r10);
            size = a2;
            flags = (__u32)a3;
        }
    }
    f->nr = nr;
    f->tid = tid;
    f->size = size;
    f->flags = flags;
    f->ts = bpf_ktime_get_ns();
    return 0;
}

SEC("raw_tracepoint/sys_exit")
int on_sys_exit(struct bpf_raw_tracepoint_args *ctx)
{
    __u64 id = bpf_get_current_pid_tgid();
    if ((__u32)(id >> 32) != target_tgid)
        return 0;
    __u64 now = bpf_ktime_get_ns();
    __u32 tid = (__u32)id, slot = tid & (SLOTS - 1);
    struct inflight *f = bpf_map_lookup_elem(&calls, &slot);
    if (!f)
        return 0;
    if (f->tid != tid || !f->ts) {
        bump(S_UNMATCHED);
        return 0;
    }
    __u64 ts = f->ts;
    f->ts = 0;
    __s64 ret = (__s64)ctx->args[1];
    struct key k = {.nr = f->nr, .flags = f->flags, .size = f->size};
    switch (k.nr) {
    case NR_read: case NR_write: case NR_pread64: case NR_pwrite64:
    case NR_readv: case NR_writev: case NR_preadv: case NR_pwritev:
    case NR_sendto: case NR_recvfrom: case NR_sendmsg: case NR_recvmsg:
        k.size = ret > 0 ? (__u64)ret : 0;
        break;
    case NR_brk: {
        __u64 prev = last_brk;
        if (ret > 0) {
            last_brk = (__u64)ret;
            k.size = prev ? ((__u64)ret > prev ? (__u64)ret - prev : prev - (__u64)ret) : 0;
        }
        break;
    }
    default:
        break;
    }
    account(&k, now - ts);  /* S_CALLS is the sum of the counts: no second map write per call */
    sample_span(&k, ts, now - ts, tid);
    return 0;
}

SEC("raw_tracepoint/sched_switch")
int on_sched_switch(struct bpf_raw_tracepoint_args *ctx)
{
    /* TP_PROTO(bool preempt, struct task_struct *prev, struct task_struct *next, unsigned int prev_state) */
    struct task_struct *prev = (struct task_struct *)ctx->args[1];
    struct task_struct *next = (struct task_struct *)ctx->args[2];
    __u64 now = 0;
    if ((__u32)(bpf_get_current_pid_tgid() >> 32) == target_tgid) {
        __u32 tid = (__u32)BPF_CORE_READ(prev, pid), slot = tid & (SLOTS - 1);
        struct offcpu *o = bpf_map_lookup_elem(&offcpu, &slot);
        if (o) {
            now = bpf_ktime_get_ns();
            o->tid = tid;
            o->runnable = BPF_CORE_READ(prev, __state) == 0;
            o->ts = now;
        }
    }
    if ((__u32)BPF_CORE_READ(next, tgid) == target_tgid) {
        __u32 tid = (__u32)BPF_CORE_READ(next, pid), slot = tid & (SLOTS - 1);
        struct offcpu *o = bpf_map_lookup_elem(&offcpu, &slot);
        if (o && o->tid == tid && o->ts) {
            if (!now)
                now = bpf_ktime_get_ns();
            struct key k = {.nr = o->runnable ? NR_CPU_QUEUE : NR_BLOCKED};
            account(&k, now - o->ts);
            sample_span(&k, o->ts, now - o->ts, tid);
            o->ts = 0;
            bump(S_SWITCHES);
        }
    }
    return 0;
}
