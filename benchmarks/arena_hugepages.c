/* arena_hugepages.c: a measuring aid (LD_PRELOAD), not part of the package.
 *
 * It asks whether the TLB is where the sweep's large sizes wait. CPython's object allocator
 * (pymalloc) takes its memory in 1 MiB arenas, each its own anonymous mmap, so with transparent
 * huge pages in their usual "madvise" mode every Python object sits in 4 KiB pages (in "always"
 * mode only where neighbouring arenas happen to fill an aligned 2 MiB range). Preloaded, this library serves exactly those
 * arena requests from one region aligned to 2 MiB and advised MADV_HUGEPAGE, so the objects of a
 * run sit in huge pages; every other mmap passes through. A released arena goes on a free list
 * and is served again (its memory is not returned to the system while the process runs).
 *
 *     gcc -O2 -shared -fPIC -o /tmp/arena_hugepages.so benchmarks/arena_hugepages.c -ldl -lpthread
 *     LD_PRELOAD=/tmp/arena_hugepages.so python benchmarks/scale.py --families sweep ...
 *
 * ARENA_HUGEPAGES_MIB sets the region's size (default 4096; reserved, not committed): once it
 * is used up, an arena request is an ordinary mmap; 0 turns the library off.
 * ARENA_HUGEPAGES_REPORT=1 prints, at exit, the arenas served from the region, those served again
 * from the free list, and those passed through.
 * Only the arena size of CPython 3.10 and later (1 MiB on 64-bit builds) is recognised.
 * AnonHugePages in /proc/<pid>/smaps_rollup tells whether the kernel backed the region huge.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/types.h>

#define AH_ARENA ((size_t)1 << 20)
#define AH_HUGE ((size_t)2 << 20)

typedef void *(*ah_mmap_fn)(void *, size_t, int, int, int, off_t);
typedef int (*ah_munmap_fn)(void *, size_t);

static pthread_once_t ah_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t ah_lock = PTHREAD_MUTEX_INITIALIZER;
static ah_mmap_fn ah_real_mmap;
static ah_munmap_fn ah_real_munmap;
static char *ah_base, *ah_next, *ah_end; /* the region; ah_next: its first arena never served */
static void **ah_free;                    /* released arenas (capacity: the region's arena count) */
static size_t ah_nfree, ah_served, ah_reused, ah_passed;

static void
ah_report(void)
{
    fprintf(stderr, "arena_hugepages: served %zu, served again %zu, passed through %zu, region %zu MiB used\n",
            ah_served, ah_reused, ah_passed, (size_t)(ah_next - ah_base) >> 20);
}

static void
ah_init(void)
{
    ah_real_mmap = (ah_mmap_fn)dlsym(RTLD_NEXT, "mmap");
    ah_real_munmap = (ah_munmap_fn)dlsym(RTLD_NEXT, "munmap");
    if (ah_real_mmap == NULL || ah_real_munmap == NULL) return;
    const char *mib = getenv("ARENA_HUGEPAGES_MIB");
    unsigned long asked = mib != NULL ? strtoul(mib, NULL, 10) : 4096;
    if (asked == 0 || asked > (1UL << 20)) return; /* (off, or past 1 TiB) */
    size_t size = (size_t)asked << 20;
    char *raw = ah_real_mmap(NULL, size + AH_HUGE, PROT_READ | PROT_WRITE,
                             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    void **free_list = ah_real_mmap(NULL, size / AH_ARENA * sizeof(void *), PROT_READ | PROT_WRITE,
                                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (raw == MAP_FAILED || free_list == MAP_FAILED) return;
    ah_base = (char *)(((uintptr_t)raw + AH_HUGE - 1) & ~(uintptr_t)(AH_HUGE - 1));
    (void)madvise(ah_base, size, MADV_HUGEPAGE); /* (refused: the region still works, in small pages) */
    ah_next = ah_base;
    ah_end = ah_base + size;
    ah_free = free_list;
    const char *report = getenv("ARENA_HUGEPAGES_REPORT");
    if (report != NULL && report[0] == '1') atexit(ah_report);
}

/* pymalloc's arena request: a fresh private anonymous read-write 1 MiB mapping */
static int
ah_is_arena(void *addr, size_t len, int prot, int flags, int fd)
{
    return addr == NULL && len == AH_ARENA && prot == (PROT_READ | PROT_WRITE)
           && (flags & (MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED)) == (MAP_PRIVATE | MAP_ANONYMOUS) && fd == -1;
}

void *
mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    pthread_once(&ah_once, ah_init);
    if (ah_real_mmap == NULL) { /* (no libc mmap found: nothing to call) */
        errno = ENOSYS;
        return MAP_FAILED;
    }
    if (ah_base != NULL && ah_is_arena(addr, len, prot, flags, fd)) {
        void *arena = NULL;
        pthread_mutex_lock(&ah_lock);
        if (ah_nfree > 0) {
            arena = ah_free[--ah_nfree];
            ah_reused++;
        } else if ((size_t)(ah_end - ah_next) >= AH_ARENA) {
            arena = ah_next;
            ah_next += AH_ARENA;
            ah_served++;
        } else {
            ah_passed++;
        }
        pthread_mutex_unlock(&ah_lock);
        if (arena != NULL) return arena;
    }
    return ah_real_mmap(addr, len, prot, flags, fd, off);
}

/* glibc's headers name the 64-bit call mmap64; libpython may link either name */
void *
mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    return mmap(addr, len, prot, flags, fd, off);
}

int
munmap(void *addr, size_t len)
{
    pthread_once(&ah_once, ah_init);
    if (ah_real_munmap == NULL) {
        errno = ENOSYS;
        return -1;
    }
    if (ah_base != NULL && (char *)addr >= ah_base && (char *)addr < ah_end) {
        if (len != AH_ARENA || ((uintptr_t)((char *)addr - ah_base) & (AH_ARENA - 1)) != 0) {
            errno = EINVAL; /* (pymalloc releases whole arenas only) */
            return -1;
        }
        pthread_mutex_lock(&ah_lock);
        ah_free[ah_nfree++] = addr; /* (at most one entry per arena of the region) */
        pthread_mutex_unlock(&ah_lock);
        return 0;
    }
    return ah_real_munmap(addr, len);
}
