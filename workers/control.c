/*-------------------------------------------------------------------------
 *
 * control.c
 *	  Rank 0's end of the control socket: framed messages to the
 *	  coordinator (protocol.h), and a watchdog that ends the job when the
 *	  coordinator's end closes (cancel, error, backend death).
 *
 *-------------------------------------------------------------------------
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "comm.h"
#include "protocol.h"
#include "worker.h"

static int	control_fd = -1;
static pthread_mutex_t send_lock = PTHREAD_MUTEX_INITIALIZER;

static void control_report(uint32_t type, const void *payload, size_t len);

/* connect to the coordinator's socket */
void
control_connect(const char *path)
{
	struct sockaddr_un addr;

	if (strlen(path) >= sizeof(addr.sun_path))
		worker_fail("control socket path too long: %s", path);
	control_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (control_fd < 0)
		worker_fail("socket: %s", strerror(errno));
	memset(&addr, 0, sizeof(addr));
	addr.sun_family = AF_UNIX;
	strcpy(addr.sun_path, path);
	if (connect(control_fd, (struct sockaddr *) &addr, sizeof(addr)) != 0)
	{
		int			e = errno;

		close(control_fd);
		control_fd = -1;
		worker_fail("could not connect to the coordinator at %s: %s", path, strerror(e));
	}
	worker_report = control_report;
}

/* write all of buf, or end the job */
static void
write_all(const void *buf, size_t len)
{
	const char *p = buf;

	while (len > 0)
	{
		ssize_t		n = send(control_fd, p, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
		{
			/* the coordinator is gone: nothing left to report to */
			fprintf(stderr, "dml-worker error: rank 0 on %s: control socket closed: %s\n",
					worker_host, strerror(errno));
			worker_abort(3);
		}
		p += n;
		len -= n;
	}
}

/* one framed message whose payload is a followed by b */
void
control_send(uint32_t type, const void *a, size_t alen, const void *b, size_t blen)
{
	uint32_t	hdr[3];

	if (control_fd < 0)
		return;
	if (alen + blen > DML_MSG_MAX)
		worker_fail("message of %zu bytes exceeds the protocol's limit", alen + blen);
	hdr[0] = DML_MSG_MAGIC;
	hdr[1] = type;
	hdr[2] = (uint32_t) (alen + blen);
	pthread_mutex_lock(&send_lock);
	write_all(hdr, sizeof(hdr));
	if (alen)
		write_all(a, alen);
	if (blen)
		write_all(b, blen);
	pthread_mutex_unlock(&send_lock);
}

/* read exactly len bytes from the coordinator, or end the job */
static void
read_all(void *buf, size_t len)
{
	char	   *p = buf;

	while (len > 0)
	{
		ssize_t		n = recv(control_fd, p, len, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			worker_fail("the coordinator closed the control socket before sending the job");
		p += n;
		len -= (size_t) n;
	}
}

/* a JOB payload of plen bytes: the text into *text (NUL-terminated), the rest into *attached */
static void
split_job(unsigned char *payload, uint32_t plen, char **text, size_t *len,
		  unsigned char **attached, size_t *attached_len)
{
	uint32_t	tlen;

	memcpy(&tlen, payload, 4);
	if (tlen > plen - 4)
		worker_fail("malformed JOB message from the coordinator");
	*text = malloc((size_t) tlen + 1);
	if (*text == NULL)
		worker_fail("out of memory");
	memcpy(*text, payload + 4, tlen);
	(*text)[tlen] = '\0';
	*len = tlen;
	*attached_len = plen - 4 - tlen;
	memmove(payload, payload + 4 + tlen, *attached_len);
	*attached = payload;
}

/*
 * control_receive_job
 *		Rank 0 reads the JOB message (protocol.h): the job's text into *text
 *		(NUL-terminated) and what came after it into *attached.
 */
void
control_receive_job(char **text, size_t *len, unsigned char **attached, size_t *attached_len)
{
	uint32_t	hdr[3];
	unsigned char *payload;

	read_all(hdr, sizeof(hdr));
	if (hdr[0] != DML_MSG_MAGIC || hdr[1] != DML_MSG_JOB || hdr[2] < 4 || hdr[2] > DML_MSG_MAX)
		worker_fail("malformed JOB message from the coordinator");
	payload = malloc((size_t) hdr[2] + 1);
	if (payload == NULL)
		worker_fail("out of memory for a job of %u bytes", hdr[2]);
	read_all(payload, hdr[2]);
	split_job(payload, hdr[2], text, len, attached, attached_len);
}

/* the runtime's report hook: one message of one part */
static void
control_report(uint32_t type, const void *payload, size_t len)
{
	control_send(type, payload, len, NULL, 0);
}

/*
 * A resident job's next JOB (dml_tune's next trial), handed from the
 * watchdog, which reads the socket, to the main thread: one at a time, as
 * the coordinator sends the next only after the model of the last.
 */
static pthread_mutex_t next_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t next_cond = PTHREAD_COND_INITIALIZER;
static unsigned char *next_payload = NULL;
static uint32_t next_len = 0;
static int	next_end = 0;		/* END came: no trial follows */

/* the watchdog's read of exactly len bytes; false at EOF or error */
static int
watch_read(void *buf, size_t len)
{
	char	   *p = buf;

	while (len > 0)
	{
		ssize_t		n = recv(control_fd, p, len, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return 0;
		p += n;
		len -= (size_t) n;
	}
	return 1;
}

/*
 * Block on the socket; when the coordinator's end closes, end the job.
 * What comes before that is a resident job's next JOB, for the main thread.
 */
static void *
watchdog(void *arg)
{
	uint32_t	hdr[3];

	while (watch_read(hdr, sizeof(hdr)))
	{
		unsigned char *payload;

		if (hdr[0] == DML_MSG_MAGIC && hdr[1] == DML_MSG_END && hdr[2] == 0)
		{
			/* the resident job is over: the main thread ends it; read no more */
			pthread_mutex_lock(&next_lock);
			next_end = 1;
			pthread_cond_broadcast(&next_cond);
			pthread_mutex_unlock(&next_lock);
			return NULL;
		}
		if (hdr[0] != DML_MSG_MAGIC || hdr[1] != DML_MSG_JOB || hdr[2] < 4 || hdr[2] > DML_MSG_MAX)
		{
			fprintf(stderr, "dml-worker error: rank 0 on %s: malformed message from the coordinator\n",
					worker_host);
			break;
		}
		payload = malloc((size_t) hdr[2] + 1);
		if (payload == NULL || !watch_read(payload, hdr[2]))
			break;
		pthread_mutex_lock(&next_lock);
		while (next_payload != NULL)
			pthread_cond_wait(&next_cond, &next_lock);
		next_payload = payload;
		next_len = hdr[2];
		pthread_cond_broadcast(&next_cond);
		pthread_mutex_unlock(&next_lock);
	}
	fprintf(stderr, "dml-worker error: rank 0 on %s: coordinator closed the control socket; ending the job\n",
			worker_host);
	fflush(stderr);
	/* SIGKILL ourselves: mpirun sees rank 0 die and ends every rank */
	kill(getpid(), SIGKILL);
	return NULL;
}

/*
 * control_next_job
 *		Rank 0 of a resident job waits (asleep) for the coordinator's next
 *		JOB, as control_receive_job reads the first.  False when the
 *		coordinator said that none follows (END).
 */
bool
control_next_job(char **text, size_t *len, unsigned char **attached, size_t *attached_len)
{
	unsigned char *payload;
	uint32_t	plen;

	pthread_mutex_lock(&next_lock);
	while (next_payload == NULL && !next_end)
		pthread_cond_wait(&next_cond, &next_lock);
	if (next_payload == NULL)
	{
		pthread_mutex_unlock(&next_lock);
		return false;
	}
	payload = next_payload;
	plen = next_len;
	next_payload = NULL;
	pthread_cond_broadcast(&next_cond);
	pthread_mutex_unlock(&next_lock);
	split_job(payload, plen, text, len, attached, attached_len);
	return true;
}

void
control_start_watchdog(void)
{
	pthread_t	t;
	sigset_t	all,
				old;

	/* the watchdog takes no signals; the main thread keeps them */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	if (pthread_create(&t, NULL, watchdog, NULL) != 0)
		worker_fail("could not start the watchdog thread");
	pthread_detach(t);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}
