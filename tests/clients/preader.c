/* Reads a file with pread in a loop, dropping its pages from the page cache
 * first so that reads really go to the device and block. */
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    static char buf[1 << 16];
    int fd = open(argv[1], O_RDONLY);
    if (fd < 0)
        return 1;
    off_t size = lseek(fd, 0, SEEK_END);
    (void)argc;
    for (;;) {
        posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        for (off_t off = 0; off + (off_t)sizeof buf <= size; off += sizeof buf)
            if (pread(fd, buf, sizeof buf, off) < 0)
                return 1;
    }
}
