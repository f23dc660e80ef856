//! The command line: commands, options, their help and examples (clap, derive).

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

const TOP_EXAMPLES: &str = "\
Examples:
  redlease run nightly-report -- ./make-report.sh
  redlease run --no-wait --url redis://cache:6379/ deploy -- ./deploy.sh prod
  redlease run --permits 4 thumbnails -- ./make-thumbnails.sh
  redlease status nightly-report
  redlease ls 'report:*'
  redlease top 'report:*'
  redlease elect --value \"$(hostname)\" scheduler -- ./schedule.sh
  redlease leader --wait-change scheduler
  redlease unlock --force nightly-report

Exit codes: the command's own under `run` (128+n when a signal n killed it);
64 bad input, 67 login refused, 69 Redis unreachable, 75 lock not had (--no-wait,
--wait), 76 Redis answered with an error, 77 refused by an ACL rule, 78 the semaphore
has more permits than --permits, 79 lease lost, 80 stopped before the lease could run
out, 126/127 command not executable / not found.
See docs/cli.md.";

const RUN_EXAMPLES: &str = "\
Examples:
  # one backup at a time across the fleet; wait as long as it takes
  redlease run backup -- pg_dump -f /backups/db.sql mydb

  # give up at once when someone else has it (exit code 75)
  redlease run --no-wait cron:cleanup -- ./cleanup.sh

  # wait at most 30 seconds, use a fair (first come, first served) lock
  redlease run --kind fair --wait 30s queue-worker -- ./work.sh

  # readers share, a writer is alone
  redlease run --kind read  doc:7 -- ./render.sh
  redlease run --kind write doc:7 -- ./edit.sh

  # hand the fencing token to the command (REDLEASE_TOKEN)
  redlease run --kind fenced ledger -- sh -c 'store --token \"$REDLEASE_TOKEN\"'

  # short leases: a cut-off run stops its command within 1.5s; SIGKILL 1s after SIGTERM
  redlease run --watchdog 3s --grace 1s job -- ./job.sh

  # at most 4 of these at once across the fleet (a semaphore of 4 permits)
  redlease run --permits 4 thumbnails -- ./make-thumbnails.sh

  # once per 10-minute window across a fleet whose cron triggers differ by seconds:
  # a run started within 10 minutes of the last one's start exits 75 at once
  redlease run --at-least 10m --at-most 1h --no-wait nightly-report -- ./report.sh

The command runs with REDLEASE_LOCK (the name), REDLEASE_OWNER (the owner field in
Redis, <client id>:<thread number>), REDLEASE_CLIENT_ID and, for --kind fenced,
REDLEASE_TOKEN in its environment. SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2
sent to redlease are passed on to it; the lock is released after it has exited.

When renewals fail the lease is at risk: the command gets SIGTERM --grace before the
lease's deadline and SIGKILL just before it, so that it is gone before another run can
start (see docs/cli.md, \"Stop in time\").

Exit codes: the command's (128+n when signal n killed it); 64 bad input, 67 login
refused, 69 Redis unreachable, 75 lock (or permit) not had, 76 Redis error, 77 ACL
refusal, 78 the semaphore has more permits than --permits, 79 lease lost (the command was told as
--on-lost says), 80 stopped before the lease could run out (renewals failing),
126/127 command not executable / not found, 128+n interrupted by signal n while
waiting.";

const STATUS_EXAMPLES: &str = "\
Examples:
  redlease status nightly-report
  redlease status --json doc:7 queue-worker | jq '.[0].holders'

Shows, for each name, whether it is held, by whom (owner field and hold count; readers
and the writer of a read-write lock; the holder's host, pid, program and uptime when its
client announced itself), the remaining lease, a fair lock's queue with each waiter's
deadline, a fenced lock's last token, and a semaphore's permits available and taken,
each with its deadline. The kind is what the data in Redis shows: a fair lock with an
empty queue reads as a plain lock.

Exit codes: 0, 64 bad input, 67 login refused, 69 Redis unreachable, 76 Redis error,
77 ACL refusal.";

const LS_EXAMPLES: &str = "\
Examples:
  redlease ls
  redlease ls 'report:*'
  redlease ls --json 'jobs:*' | jq -r '.[] | select(.held) | .name'

Lists the locks, semaphores and group locks whose names match PATTERN (Redis's glob
syntax; default *), one line each: name, kind, and who holds it. Every master is
scanned with SCAN (never KEYS), so the cost grows with the database: give a pattern
where it holds much else. The keys kept beside locks (queues, tokens, announcements)
and keys that are not locks are left out.

Exit codes: 0 (also when nothing matches), 64 bad input, 67 login refused, 69 Redis
unreachable, 76 Redis error, 77 ACL refusal.";

const TOP_VIEW_EXAMPLES: &str = "\
Examples:
  redlease top
  redlease top 'jobs:*'
  redlease top --once 'jobs:*' | grep queued

The locks, semaphores, group locks and elections whose names match PATTERN (as `ls`
finds them), live: one line each with its kind, held or free, its holder (host, pid
and thread when its client announced itself), the lease left as a bar (against the
longest lease seen on it since the view began, and at least the default watchdog's
30s) and in seconds, its waiters (queued on a fair lock, clients waiting on the
others), and an election's term and leader, a fenced lock's last token, a window's
end. Most waiters first. Read every --interval; q, Esc or Ctrl-C quits. A reading that
fails is shown above the last good one, and the view goes on trying. --once prints one
frame (every row, as wide as the terminal or 160 columns) and exits.

Exit codes: 0, 64 bad input (also the live view off a terminal), 67 login refused, 69
Redis unreachable, 70 the terminal failed, 76 Redis error, 77 ACL refusal; the live view
exits 0 on q whatever it read.";

const ELECT_EXAMPLES: &str = "\
Examples:
  # run the scheduler on one host of the fleet at a time; the others wait to lead
  redlease elect --value \"$(hostname)\" scheduler -- ./schedule.sh

  # lead now or not at all (exit code 75 when someone else leads)
  redlease elect --no-wait --value web-3 scheduler -- ./schedule.sh

Campaigns in the election NAME, advertising VALUE (what `redlease leader` shows), and
runs the command while leading, as `run` runs it under a lock: a leadership at risk or
lost stops the command in time (see `run --help`), and the leadership is resigned when
it exits, handing over to the next candidate at once. The command runs with
REDLEASE_LOCK (the name), REDLEASE_TERM (the term: greater than every earlier leader's;
fence what the leader writes with it), REDLEASE_OWNER and REDLEASE_CLIENT_ID.

Exit codes: as run's (75: someone else leads, with --no-wait or past --wait).";

const LEADER_EXAMPLES: &str = "\
Examples:
  redlease leader scheduler
  redlease leader --json scheduler | jq -r '.leader.value'
  # follow leadership: print each new state as it comes
  while redlease leader --wait-change scheduler; do :; done

Prints who leads the election NAME: the value it advertises, its term and its lease left
(`NAME: no leader` when nobody does). With --wait-change, waits until the leadership
changes (a new term, or nobody leading; without polling) and prints the new state.

Exit codes: 0, 64 bad input, 67 login refused, 69 Redis unreachable, 76 Redis error,
77 ACL refusal, 130 interrupted (SIGINT) while waiting.";

const UNLOCK_EXAMPLES: &str = "\
Examples:
  redlease unlock --force nightly-report
  redlease unlock --force --kind fair queue-worker

Deletes the lock whoever holds it and wakes its waiters (the library's force_unlock).
The holder learns of the loss at its next renewal; a holder under `redlease run` then
tells its command as its --on-lost says. The lock's kind is read from Redis (waiters of
a fair or read-write lock are woken on channels of their own); a --kind that is not the
kind found there is refused, naming it.

Exit codes: 0 deleted, 1 there was no lock, 64 bad input (also a wrong --kind), 67 login refused, 69 Redis
unreachable, 76 Redis error, 77 ACL refusal.";

/// Distributed locks on Redis from the shell (Redisson's layout, watchdog leases).
#[derive(Debug, Parser)]
#[command(name = "redlease", version, after_help = TOP_EXAMPLES, disable_help_subcommand = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a command while holding a lock: acquire, run, keep the lease alive, release.
    #[command(after_help = RUN_EXAMPLES)]
    Run(RunArgs),
    /// Show who holds locks, their leases, queues and tokens, and semaphores' permits.
    #[command(after_help = STATUS_EXAMPLES)]
    Status(StatusArgs),
    /// List locks and semaphores by name pattern, with their kind and holder.
    #[command(after_help = LS_EXAMPLES)]
    Ls(ListArgs),
    /// Watch locks live: held or free, holder, lease left, waiters; sorted by waiters.
    #[command(after_help = TOP_VIEW_EXAMPLES)]
    Top(TopArgs),
    /// Run a command while this process leads an election (one leader at a time).
    #[command(after_help = ELECT_EXAMPLES)]
    Elect(ElectArgs),
    /// Show who leads an election, or wait until that changes.
    #[command(after_help = LEADER_EXAMPLES)]
    Leader(LeaderArgs),
    /// Delete a lock whoever holds it (administrative), waking its waiters.
    #[command(after_help = UNLOCK_EXAMPLES)]
    Unlock(UnlockArgs),
}

/// The kinds of lock, as the library offers them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Kind {
    /// Reentrant, not fair (Redisson's RLock).
    Lock,
    /// First come, first served (Redisson's RFairLock).
    Fair,
    /// The shared side of a read-write lock.
    Read,
    /// The exclusive side of a read-write lock.
    Write,
    /// Every grant carries a fencing token (REDLEASE_TOKEN).
    Fenced,
    /// Reentrant, no pub/sub at all: a waiting run polls (Redisson's RSpinLock), for
    /// deployments without pub/sub.
    Spin,
}

impl Kind {
    /// Its `--kind` value.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Lock => "lock",
            Kind::Fair => "fair",
            Kind::Read => "read",
            Kind::Write => "write",
            Kind::Fenced => "fenced",
            Kind::Spin => "spin",
        }
    }
}

/// What to do with the command when the lease is at risk or lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OnLost {
    /// SIGTERM --grace before the lease's deadline, SIGKILL just before it.
    Term,
    /// SIGKILL just before the lease's deadline (at once when it is lost).
    Kill,
    /// Let it run; the exit code still says the lease was lost (79).
    Ignore,
}

/// Where Redis is and how long to wait for it (every command).
#[derive(Debug, Clone, Args)]
pub struct Connection {
    /// The Redis URL (see the help text).
    #[arg(
        long,
        env = "REDIS_URL",
        default_value = "redis://127.0.0.1:6379/",
        hide_env_values = true,
        help = "Redis URL: redis://[[user]:password@]host[:port][/db], rediss://... (TLS), unix:///path, \
                redis-sentinel://host[:port][,host[:port]...][/db]#master-name (Sentinel), \
                or redis-cluster://host[:port][,host[:port]...] (Redis Cluster)"
    )]
    pub url: String,

    /// Connect timeout and command timeout (defaults: the library's, 5s and 3s): an
    /// unreachable or silent server fails within about this.
    #[arg(long, value_name = "DURATION", value_parser = duration, allow_hyphen_values = true)]
    pub timeout: Option<Duration>,

    /// PEM file of the CA(s) to trust for rediss:// instead of the system's roots.
    #[arg(long, value_name = "FILE")]
    pub tls_ca: Option<PathBuf>,

    /// PEM file of a client certificate chain for rediss:// (mutual TLS); needs --tls-key.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,

    /// PEM file of the client certificate's private key; needs --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,

    /// Do not check the server's certificate (rediss://): tests only.
    #[arg(long)]
    pub tls_insecure: bool,
}

/// How `run` and `elect` tend the command while they hold: the lease that keeps the hold,
/// what the command is told when it is at risk or lost, and the waiting line.
#[derive(Debug, Clone, Args)]
pub struct Tending {
    /// The watchdog's lease, renewed every third of it while the command runs; a crashed
    /// redlease's hold (a lock, a permit, a leadership) ends after it (default 30s, at
    /// least 30ms).
    #[arg(long, value_name = "DURATION", value_parser = duration, allow_hyphen_values = true)]
    pub watchdog: Option<Duration>,

    /// What to do with the command when the lease is at risk (renewals failing) or lost.
    #[arg(long, value_enum, default_value_t = OnLost::Term)]
    pub on_lost: OnLost,

    /// Time between SIGTERM and SIGKILL (--on-lost term): SIGKILL lands before the
    /// lease's deadline, SIGTERM this long before. It must fit in the warning a lease gives
    /// (about half the watchdog's, or the fixed --lease); default 10s, or what fits.
    #[arg(long, value_name = "DURATION", value_parser = duration, allow_hyphen_values = true)]
    pub grace: Option<Duration>,

    /// No status line while waiting.
    #[arg(long, short)]
    pub quiet: bool,
}

/// Most permits `--permits` takes: the library's limit (2^48, what Redis's integers and
/// Lua's numbers hold exactly; not public in the library).
pub const MAX_PERMITS: u64 = 1 << 48;

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Kind of lock.
    #[arg(long, value_enum, default_value_t = Kind::Lock)]
    pub kind: Kind,

    /// Run under a semaphore of N permits instead of a lock: at most N of these commands
    /// at once, fleet-wide (one permit per run, renewed by the watchdog). The first run
    /// sets the semaphore to N; a semaphore set to more refuses (exit code 78).
    #[arg(
        long,
        value_name = "N",
        value_parser = clap::value_parser!(u64).range(1..=MAX_PERMITS),
        conflicts_with = "kind"
    )]
    pub permits: Option<u64>,

    /// Wait at most this long for the lock (exit code 75 when it is not free by then).
    /// Without --wait or --no-wait: wait as long as it takes.
    #[arg(long, value_name = "DURATION", value_parser = duration, allow_hyphen_values = true, conflicts_with = "no_wait")]
    pub wait: Option<Duration>,

    /// Do not wait: exit with code 75 at once when the lock is held.
    #[arg(long)]
    pub no_wait: bool,

    /// A fixed lease that is not renewed: the lock expires after it even if the command
    /// still runs, which then counts as a lost lease. Default: the watchdog's, renewed.
    /// Also --at-most: the longest a run may hold the lock.
    #[arg(long, visible_alias = "at-most", value_name = "DURATION", value_parser = duration, allow_hyphen_values = true)]
    pub lease: Option<Duration>,

    /// Keep the lock taken at least this long after it was had, however soon the command
    /// ends: once per window, fleet-wide (with --no-wait a run started inside the window
    /// exits 75 at once). For --kind lock, fenced and spin; no longer than --at-most.
    #[arg(long, value_name = "DURATION", value_parser = duration, allow_hyphen_values = true, conflicts_with = "permits")]
    pub at_least: Option<Duration>,

    /// Set by `elect`: campaign in the election NAME advertising this, instead of a lock.
    #[arg(skip)]
    pub elect: Option<String>,

    #[command(flatten)]
    pub tending: Tending,

    #[command(flatten)]
    pub connection: Connection,

    /// The lock's (or with --permits the semaphore's) name: its Redis key.
    #[arg(value_name = "NAME")]
    pub name: String,

    /// The command to run, after `--`, and its arguments.
    #[arg(value_name = "COMMAND", last = true, required = true, num_args = 1..)]
    pub command: Vec<OsString>,
}

#[derive(Debug, Args)]
pub struct ElectArgs {
    /// What this leader advertises (an address, a host name): what `redlease leader`
    /// shows. Required, not empty.
    #[arg(long, value_name = "VALUE")]
    pub value: String,

    /// Campaign at most this long (exit code 75 when another still leads by then).
    /// Without --wait or --no-wait: as long as it takes.
    #[arg(long, value_name = "DURATION", value_parser = duration, allow_hyphen_values = true, conflicts_with = "no_wait")]
    pub wait: Option<Duration>,

    /// Do not wait: exit with code 75 at once when someone else leads.
    #[arg(long)]
    pub no_wait: bool,

    #[command(flatten)]
    pub tending: Tending,

    #[command(flatten)]
    pub connection: Connection,

    /// The election's name.
    #[arg(value_name = "NAME")]
    pub name: String,

    /// The command to run while leading, after `--`, and its arguments.
    #[arg(value_name = "COMMAND", last = true, required = true, num_args = 1..)]
    pub command: Vec<OsString>,
}

impl ElectArgs {
    /// The `run` that does it: the election instead of a lock.
    pub fn into_run(self) -> RunArgs {
        RunArgs {
            kind: Kind::Lock,
            permits: None,
            wait: self.wait,
            no_wait: self.no_wait,
            lease: None,
            at_least: None,
            elect: Some(self.value),
            tending: self.tending,
            connection: self.connection,
            name: self.name,
            command: self.command,
        }
    }
}

#[derive(Debug, Args)]
pub struct LeaderArgs {
    /// One JSON object on stdout: {"name", "leader": {"value", "term", "lease_ms"} or null}.
    #[arg(long)]
    pub json: bool,

    /// Wait until the leadership changes, then print the new state.
    #[arg(long)]
    pub wait_change: bool,

    #[command(flatten)]
    pub connection: Connection,

    /// The election's name.
    #[arg(value_name = "NAME")]
    pub name: String,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// One JSON array on stdout, one object per name (fields in docs/cli.md).
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub connection: Connection,

    /// The locks' (or semaphores') names.
    #[arg(value_name = "NAME", required = true, num_args = 1..)]
    pub names: Vec<String>,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// One JSON array on stdout, one object per lock (the objects of `status --json`).
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub connection: Connection,

    /// Which names (Redis's glob syntax: *, ?, [a-z], \\ to escape). Default: every one.
    #[arg(value_name = "PATTERN")]
    pub pattern: Option<String>,
}

#[derive(Debug, Args)]
pub struct TopArgs {
    /// Print one frame and exit (for scripts), instead of the live view.
    #[arg(long)]
    pub once: bool,

    /// How often Redis is read.
    #[arg(long, value_name = "DURATION", value_parser = duration, default_value = "1s")]
    pub interval: Duration,

    #[command(flatten)]
    pub connection: Connection,

    /// Which names (Redis's glob syntax, as `ls` reads it). Default: every one.
    #[arg(value_name = "PATTERN")]
    pub pattern: Option<String>,
}

#[derive(Debug, Args)]
pub struct UnlockArgs {
    /// Required: this deletes the lock whoever holds it. (Checked by `unlock` itself, not
    /// by clap, so that its message says why.)
    #[arg(long)]
    pub force: bool,

    /// Kind of lock (decides which waiters are woken). Found in Redis when not given (as
    /// `status` finds it); given, it must be the kind found there.
    #[arg(long, value_enum)]
    pub kind: Option<Kind>,

    #[command(flatten)]
    pub connection: Connection,

    /// The lock's name.
    #[arg(value_name = "NAME")]
    pub name: String,
}

/// A duration as humantime reads it: `500ms`, `10s`, `2m 30s`, `1h`.
fn duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text).map_err(|e| format!("{e} (write a duration such as 500ms, 10s or 2m)"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn run_takes_its_command_after_the_double_dash() {
        let cli = Cli::try_parse_from(["redlease", "run", "--wait", "2s", "n", "--", "ls", "-l"]).unwrap();
        let Some(Command::Run(run)) = cli.command else { panic!("not run") };
        assert_eq!(run.wait, Some(Duration::from_secs(2)));
        assert_eq!(run.name, "n");
        assert_eq!(run.command, vec![OsString::from("ls"), OsString::from("-l")]);
        assert!(Cli::try_parse_from(["redlease", "run", "n"]).is_err());
        assert!(Cli::try_parse_from(["redlease", "run", "--wait", "1s", "--no-wait", "n", "--", "x"]).is_err());
        assert!(Cli::try_parse_from(["redlease", "run", "--wait", "soon", "n", "--", "x"]).is_err());
        // `--force` is checked by `unlock` (its message says why), not by the parser.
        let Some(Command::Unlock(unlock)) = Cli::try_parse_from(["redlease", "unlock", "n"]).unwrap().command else {
            panic!("not unlock")
        };
        assert!(!unlock.force);
    }

    #[test]
    fn permits_are_1_to_the_librarys_limit_and_exclude_a_kind() {
        let parse = |args: &[&str]| Cli::try_parse_from([&["redlease", "run"], args, &["n", "--", "x"]].concat());
        let Some(Command::Run(run)) = parse(&["--permits", "2"]).unwrap().command else { panic!("not run") };
        assert_eq!(run.permits, Some(2));
        assert!(parse(&["--permits", &MAX_PERMITS.to_string()]).is_ok());
        for bad in ["0", "-1", "two", "281474976710657", "99999999999999999999999"] {
            assert!(parse(&["--permits", bad]).is_err(), "{bad}");
        }
        assert!(parse(&["--permits", "2", "--kind", "fair"]).is_err());
        assert!(parse(&["--permits", "2", "--kind", "lock"]).is_err());
        assert!(parse(&["--permits", "2", "--lease", "5s", "--no-wait"]).is_ok());
    }
}
