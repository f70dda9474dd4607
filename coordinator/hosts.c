/*-------------------------------------------------------------------------
 *
 * hosts.c
 *	  Where a job's ranks run: dml.hosts, narrowed by dml_train's hosts
 *	  argument, and the hosts a restart leaves out, become mpirun's --host
 *	  list.
 *
 * dml.hosts is written in Open MPI's hostfile terms, one host a line or
 * entries separated by commas: "db1 slots=4, gpu2 slots=8".  A host
 * without slots= has 1.  The backend's own host must be among them (by its
 * host name, or as localhost): rank 0 runs there, because it reaches the
 * coordinator over the job's Unix-domain control socket and receives the
 * job from it, and it comes first in the list, so Open MPI's by-slot
 * mapping gives it rank 0.
 *
 * Ranks are spread evenly: each chosen host gets N / hosts ranks (the
 * first ones one more), at most its slots; what does not fit goes to the
 * hosts with slots left, in order.  Each host's ranks are consecutive, so
 * ranks that share a host also share a range of data ranks (the
 * hierarchical all-reduce reduces within a host first).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <ctype.h>
#include <unistd.h>

#include "lib/stringinfo.h"
#include "nodes/value.h"

#include "coordinator.h"
#include "hosts.h"

/*
 * DmlHostsParseText
 *		Parse dml.hosts text into a List of DmlHost (palloc'd in the current
 *		context).  Returns NULL and sets *error (a static string) when the
 *		text does not parse; an empty text gives NIL.
 */
List *
DmlHostsParseText(const char *text, const char **error)
{
	List	   *hosts = NIL;
	char	   *copy = pstrdup(text ? text : "");
	char	   *save = NULL;
	ListCell   *lc;

	*error = NULL;
	for (char *entry = strtok_r(copy, ",\n", &save); entry; entry = strtok_r(NULL, ",\n", &save))
	{
		char	   *tsave = NULL;
		char	   *name = strtok_r(entry, " \t\r", &tsave);
		char	   *tok;
		DmlHost    *h;

		if (name == NULL || name[0] == '#')
			continue;
		h = palloc0(sizeof(DmlHost));
		h->name = pstrdup(name);
		h->slots = 1;
		for (const char *p = name; *p; p++)
			if (!(isalnum((unsigned char) *p) || *p == '-' || *p == '.' || *p == '_'))
			{
				*error = "A host name has letters, digits, '-', '.' and '_' only.";
				return NULL;
			}
		while ((tok = strtok_r(NULL, " \t\r", &tsave)) != NULL)
		{
			char	   *end;
			long		v;

			if (strncmp(tok, "slots=", 6) != 0 && strncmp(tok, "max_slots=", 10) != 0)
			{
				*error = "An entry is a host name, then slots=N (and max_slots=N) only.";
				return NULL;
			}
			v = strtol(strchr(tok, '=') + 1, &end, 10);
			if (*end != '\0' || v < 1 || v > 100000)
			{
				*error = "slots= takes a number from 1 to 100000.";
				return NULL;
			}
			if (tok[0] == 's')
				h->slots = (int) v;
		}
		foreach(lc, hosts)
		{
			DmlHost	   *other = lfirst(lc);

			if (strcmp(other->name, h->name) == 0)
			{
				*error = "A host is named twice.";
				return NULL;
			}
		}
		hosts = lappend(hosts, h);
	}
	return hosts;
}

/* the backend's host: its name, or localhost */
static bool
is_local(const char *name)
{
	char		me[256];

	if (strcmp(name, "localhost") == 0 || strcmp(name, "127.0.0.1") == 0)
		return true;
	if (gethostname(me, sizeof(me) - 1) != 0)
		return false;
	me[sizeof(me) - 1] = '\0';
	return strcmp(name, me) == 0;
}

/*
 * DmlHostsChoose
 *		The hosts a job may use: dml.hosts, narrowed to the names in narrow
 *		(NIL: all of them), the backend's host first.  NIL when dml.hosts is
 *		empty and nothing narrows it (every rank on this host).
 */
List *
DmlHostsChoose(List *narrow)
{
	const char *error;
	List	   *all = DmlHostsParseText(dml_hosts, &error);
	List	   *chosen = NIL;
	DmlHost    *local = NULL;
	ListCell   *lc,
			   *lc2;

	if (error)
		elog(ERROR, "dml: dml.hosts does not parse: %s", error);
	if (all == NIL && narrow != NIL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("hosts were named, but dml.hosts is empty"),
				 errhint("A superuser lists the hosts jobs may run on in dml.hosts.")));
	if (all == NIL)
		return NIL;
	foreach(lc, narrow)
	{
		char	   *want = lfirst(lc);

		bool		found = false;

		foreach(lc2, all)
		{
			DmlHost	   *h = lfirst(lc2);

			found |= strcmp(h->name, want) == 0;
		}
		if (!found)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("host \"%s\" is not in dml.hosts", want),
					 errhint("Jobs run only on the hosts a superuser listed in dml.hosts.")));
	}
	foreach(lc, all)
	{
		DmlHost	   *h = lfirst(lc);

		bool		wanted = narrow == NIL;

		foreach(lc2, narrow)
		{
			char	   *want = lfirst(lc2);

			wanted |= strcmp(h->name, want) == 0;
		}
		if (!wanted)
			continue;
		if (local == NULL && is_local(h->name))
			local = h;
		else
			chosen = lappend(chosen, h);
	}
	if (local == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the hosts of a job must include this server's host"),
				 errdetail("Rank 0 runs on the server's host: it receives the job from the backend and reports to it over a local socket."),
				 errhint("Name this host in dml.hosts (and in hosts, when it is given).")));
	return lcons(local, chosen);
}

/*
 * DmlHostsPlace
 *		mpirun's --host value for ranks ranks over hosts, leaving out the
 *		names in lost: "a:2,b:2,c:1".  NULL when hosts is NIL.
 */
char *
DmlHostsPlace(List *hosts, List *lost, int ranks)
{
	int			nhosts = 0,
				slots = 0,
				i = 0,
				left = ranks;
	int		   *count;
	DmlHost   **h;
	StringInfoData buf;
	ListCell   *lc,
			   *lc2;

	if (hosts == NIL)
		return NULL;
	h = palloc(sizeof(DmlHost *) * list_length(hosts));
	foreach(lc, hosts)
	{
		DmlHost	   *host = lfirst(lc);

		bool		gone = false;

		foreach(lc2, lost)
			gone |= strcmp(strVal(lfirst(lc2)), host->name) == 0;
		if (gone)
			continue;
		h[nhosts++] = host;
		slots += host->slots;
	}
	if (slots < ranks)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
				 errmsg("%d ranks do not fit on the %d slots of the job's hosts", ranks, slots),
				 lost != NIL ? errdetail("Host \"%s\" was lost.", strVal(llast(lost))) : 0,
				 errhint("Ask for fewer workers, or a superuser adds slots in dml.hosts.")));
	count = palloc0(sizeof(int) * nhosts);
	for (i = 0; i < nhosts; i++)
	{
		count[i] = Min(h[i]->slots, ranks / nhosts + (i < ranks % nhosts ? 1 : 0));
		left -= count[i];
	}
	for (i = 0; i < nhosts && left > 0; i++)
	{
		int			more = Min(left, h[i]->slots - count[i]);

		count[i] += more;
		left -= more;
	}
	initStringInfo(&buf);
	for (i = 0; i < nhosts; i++)
		if (count[i] > 0)
			appendStringInfo(&buf, "%s%s:%d", buf.len ? "," : "", h[i]->name, count[i]);
	return buf.data;
}
