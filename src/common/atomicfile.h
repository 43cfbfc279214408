/*
 * atomicfile.h - replacing a file so that a crash or a failure never leaves
 * a torn file under its name, and nothing planted next to it is followed.
 * Internal header (statefile.c and vecio.c write through it).
 *
 * The data goes to a fresh PATH.tmp.XXXXXX made by mkstemp (O_CREAT |
 * O_EXCL: a symlink or file planted at any such name is never followed or
 * reused), is fsync'd, renamed over PATH, and the directory is fsync'd.
 * On failure the temporary is removed and PATH is untouched.  MESS_EIO
 * leaves errno as the failing system call set it.
 *
 * Creating instead of replacing (atomicfile_end_new, atomicfile_create:
 * a client file's only copy of its keys): the same temporary, fsync'd,
 * is linked to PATH with link(2), which fails if any name is there, so a
 * file is never replaced and two racing creators cannot both win; the
 * loser gets MESS_EEXIST (errno EEXIST) and PATH is untouched.  A file
 * system without hard links (FAT) refuses the link: MESS_EIO, errno
 * EPERM (or EOPNOTSUPP).
 */
#ifndef MESS_ATOMICFILE_H
#define MESS_ATOMICFILE_H

#include <stddef.h>
#include <stdint.h>

struct atomicfile {
    int fd;     /* the temporary, open for writing */
    char *tmp;  /* its name */
    char *dir;  /* a copy of PATH for the directory fsync, allocated before
                   the rename (out of memory after it would report a failed
                   save that had already replaced the file) */
};

/* Creates the temporary next to path with permission bits `mode` (0600 for
 * the client file).  MESS_OK, MESS_ENOMEM or MESS_EIO (errno kept). */
int atomicfile_begin(struct atomicfile *af, const char *path, unsigned mode);

/* fsyncs the file or directory at path (after a rename: its directory, so
 * the new name is durable).  A directory on a file system that cannot sync
 * directories (EINVAL) is not an error.  MESS_EIO leaves errno set. */
int atomicfile_sync(const char *path);

/* Appends len bytes; MESS_EIO (errno kept) on a failed write. */
int atomicfile_write(struct atomicfile *af, const void *data, size_t len);

/* rc MESS_OK: fsyncs and closes the temporary, renames it over path and
 * fsyncs the directory; any other rc (the writer's failure): closes and
 * removes the temporary.  Frees af's memory either way.  Returns rc, or
 * MESS_EIO (errno kept) if a step failed. */
int atomicfile_end(struct atomicfile *af, const char *path, int rc);

/* open(2) of path that never follows a symbolic link at its last
 * component (O_NOFOLLOW) and refuses anything but a regular file: the
 * files of a server directory and its log are opened through it, so a
 * link planted in the directory can neither redirect a write outside it
 * nor be read as one of its files.  flags are open's (O_CLOEXEC added);
 * mode is used with O_CREAT.  The descriptor, or -1 with errno: ELOOP for
 * a symbolic link, EINVAL for a directory, device or other non-regular
 * file, else open's. */
int atomicfile_open_regular(const char *path, int flags, unsigned mode);

struct stat;
/* The check both make: open(2) of path with flags (O_NONBLOCK and
 * O_CLOEXEC added: a FIFO is refused at once instead of holding the open
 * until a writer comes, and nothing changes for a regular file), refused
 * unless it is a regular file: -1 with errno EISDIR for a directory,
 * EINVAL for a device, FIFO or socket, else open's; *st its status.
 * Symbolic links are followed (a user's state file may be one);
 * atomicfile_open_regular adds O_NOFOLLOW and says EINVAL for a
 * directory it opened. */
int atomicfile_open_file(const char *path, int flags, unsigned mode, struct stat *st);

/* As atomicfile_end, but creating path: link(2) instead of the rename,
 * MESS_EEXIST if anything is at path (nothing changed there). */
int atomicfile_end_new(struct atomicfile *af, const char *path, int rc);

/* The whole of data in one call: begin, write, end. */
int atomicfile_replace(const char *path, const uint8_t *data, size_t len,
                       unsigned mode);
/* The same, creating path (atomicfile_end_new): MESS_EEXIST if it exists. */
int atomicfile_create(const char *path, const uint8_t *data, size_t len,
                      unsigned mode);

#endif
