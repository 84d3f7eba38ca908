/* secret_file.c - see secret_file.h. */
#include "autoconfig.h"
#include "common/secret_file.h"

#include <sys/stat.h>

#include "common/log.h"

void secret_file_check(const char *path, const char *secret)
{
	struct stat st;

	if (!secret || stat(path, &st) != 0 || !(st.st_mode & S_IROTH))
		return;
	log_warn("%s holds the %s and is readable by every user of the host (mode %04o): "
		 "chmod o-r it (0640, group of the service)",
		 path, secret, (unsigned)(st.st_mode & 07777));
}
