//! What the hand-off and throughput steps contend for: a lock kind of the library, a spin
//! lock, a semaphore of one permit, or a peer crate's lock; one process's handle on it
//! ([`Process`]) and one thread's ([`Contender`]). Each peer is used through its public
//! sync API only.

use std::time::{Duration, Instant};

use redlease::{AnyLock, BackOff, Client, LockGuard, PermitExpirableSemaphore, PermitGuard, Semaphore, SemaphoreGuard};

use crate::experiments::LockKind;

/// A peer crate measured against the library.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Peer {
    /// `rlock` (sync API), default options: a 10 s TTL renewed by a thread per guard.
    Rlock,
    /// `rlock` with `RenewalMode::Disabled` (a fixed 10 s TTL, no renewal thread).
    RlockNoRenewal,
    /// `redis-lock` (sync API, `MultiResourceLock` on one resource), default expiration.
    RedisLock,
}

impl Peer {
    /// How long a waiter sleeps between attempts, with the peer's defaults.
    pub(crate) fn poll_interval(self) -> Duration {
        match self {
            Peer::Rlock | Peer::RlockNoRenewal => rlock::AcquireOptions::default().retry_interval(),
            Peer::RedisLock => redis_lock::DEFAULT_SLEEP,
        }
    }

    fn rlock_options(self) -> rlock::AcquireOptions {
        match self {
            Peer::RlockNoRenewal => rlock::AcquireOptions::builder()
                .renewal_mode(rlock::RenewalMode::Disabled)
                .build()
                .expect("rlock options without renewal"),
            _ => rlock::AcquireOptions::default(),
        }
    }

    /// The Redis commands a client of this peer sends itself (not those its scripts run):
    /// what `INFO commandstats` is read for.
    pub(crate) fn commands(self) -> &'static [&'static str] {
        match self {
            // Acquire is a plain `SET NX PX`, release a script (whose commands are TYPE,
            // GET and DEL, never SET).
            Peer::Rlock | Peer::RlockNoRenewal => &["set", "evalsha"],
            // Both are Redis functions.
            Peer::RedisLock => &["fcall"],
        }
    }
}

/// The library's spin lock (Redisson's `RSpinLock`): the plain lock's key and scripts, no
/// pub/sub; a waiter polls, sleeping between attempts as its back-off says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Spin {
    /// `BackOff::DEFAULT`, Redisson's: 1 ms, doubling (with a jitter of at most a millisecond
    /// per attempt so far) up to 128 ms, then 128 ms.
    Exponential,
    /// `BackOff::constant(1 ms)`: the quickest a spin waiter can be, one attempt per ms.
    Constant1Ms,
}

/// The default back-off's first and longest sleeps (`BackOff::DEFAULT`), and the sleeps
/// before it reaches the longest (1, 2, 4, … 64 ms, jitter aside).
pub(crate) const SPIN_FIRST_SLEEP: Duration = Duration::from_millis(1);
pub(crate) const SPIN_MAX_SLEEP: Duration = Duration::from_millis(128);
const SPIN_RAMP: Duration = Duration::from_millis(1 + 2 + 4 + 8 + 16 + 32 + 64);
/// The constant back-off of the second spin subject.
const SPIN_CONSTANT: Duration = Duration::from_millis(1);

impl Spin {
    pub(crate) fn backoff(self) -> BackOff {
        match self {
            Spin::Exponential => BackOff::DEFAULT,
            Spin::Constant1Ms => BackOff::constant(SPIN_CONSTANT),
        }
    }

    /// The part of a wait in which a hand-off's release comes, at a random moment: the
    /// sleeps until the longest, then one longest sleep (jitter aside). For a constant
    /// back-off that is one sleep, the peers' poll interval.
    pub(crate) fn release_window(self) -> Duration {
        match self {
            Spin::Exponential => SPIN_RAMP + SPIN_MAX_SLEEP,
            Spin::Constant1Ms => SPIN_CONSTANT,
        }
    }
}

/// What is contended for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Subject {
    Lock(LockKind),
    /// The library's spin lock, watchdog lease.
    Spin(Spin),
    /// A `Semaphore` of one permit.
    Semaphore,
    /// A `PermitExpirableSemaphore` of one permit, watchdog lease.
    Permits,
    Peer(Peer),
}

impl Subject {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Subject::Lock(kind) => kind.as_str(),
            Subject::Spin(Spin::Exponential) => "spin",
            Subject::Spin(Spin::Constant1Ms) => "spin-constant-1ms",
            Subject::Semaphore => "semaphore",
            Subject::Permits => "permits",
            Subject::Peer(Peer::Rlock) => "rlock",
            Subject::Peer(Peer::RlockNoRenewal) => "rlock-no-renewal",
            Subject::Peer(Peer::RedisLock) => "redis-lock",
        }
    }

    pub(crate) fn parse(subject: &str) -> Subject {
        match subject {
            "spin" => Subject::Spin(Spin::Exponential),
            "spin-constant-1ms" => Subject::Spin(Spin::Constant1Ms),
            "semaphore" => Subject::Semaphore,
            "permits" => Subject::Permits,
            "rlock" => Subject::Peer(Peer::Rlock),
            "rlock-no-renewal" => Subject::Peer(Peer::RlockNoRenewal),
            "redis-lock" => Subject::Peer(Peer::RedisLock),
            kind => Subject::Lock(LockKind::parse(kind)),
        }
    }

    /// The Redis commands its clients send themselves (see [`Peer::commands`]).
    pub(crate) fn commands(self) -> &'static [&'static str] {
        match self {
            Subject::Peer(peer) => peer.commands(),
            _ => &["evalsha"],
        }
    }
}

/// One process's handle: the library's client, or a peer's manager or client.
#[derive(Clone)]
pub(crate) struct Process {
    subject: Subject,
    handle: Handle,
}

#[derive(Clone)]
enum Handle {
    Library(Client),
    Rlock(rlock::sync_lock::RLock),
    RedisLock(redis027::Client),
}

impl Process {
    /// Connects to `url` as `subject`'s library does.
    pub(crate) fn open(subject: Subject, url: &str) -> Process {
        let handle = match subject {
            Subject::Peer(Peer::Rlock | Peer::RlockNoRenewal) => {
                Handle::Rlock(rlock::sync_lock::RLock::new(url).expect("rlock manager"))
            }
            Subject::Peer(Peer::RedisLock) => {
                let client = redis027::Client::open(url).expect("redis-lock's redis client");
                // Loads its Redis functions (FUNCTION LOAD REPLACE): once per server suffices.
                redis_lock::sync::setup(&client).expect("redis-lock setup");
                Handle::RedisLock(client)
            }
            _ => Handle::Library(Client::open(url).expect("client")),
        };
        Process { subject, handle }
    }

    /// `subject` through an open client of the library.
    pub(crate) fn with_client(subject: Subject, client: &Client) -> Process {
        assert!(!matches!(subject, Subject::Peer(_)), "a peer has no library client");
        Process { subject, handle: Handle::Library(client.clone()) }
    }

    /// The library's client, when the subject is the library's.
    pub(crate) fn client(&self) -> Option<&Client> {
        match &self.handle {
            Handle::Library(client) => Some(client),
            _ => None,
        }
    }

    /// A thread's contender for the lock (or semaphore) `name`. A semaphore gets its one
    /// permit here when it has none yet.
    pub(crate) fn contender(&self, name: &str) -> Box<dyn Contender> {
        match (&self.handle, self.subject) {
            (Handle::Library(client), Subject::Lock(kind)) => {
                Box::new(LibraryLock { lock: kind.handle(client, name.to_string()), guard: None })
            }
            (Handle::Library(client), Subject::Spin(spin)) => {
                Box::new(LibraryLock { lock: client.spin_lock(name).with_backoff(spin.backoff()).into(), guard: None })
            }
            (Handle::Library(client), Subject::Semaphore) => {
                let semaphore = client.semaphore(name);
                semaphore.try_set_permits(1).expect("set the semaphore's permit");
                Box::new(OnePermit { semaphore, guard: None })
            }
            (Handle::Library(client), Subject::Permits) => {
                let semaphore = client.permit_expirable_semaphore(name);
                semaphore.try_set_permits(1).expect("set the semaphore's permit");
                Box::new(OneExpirablePermit { semaphore, guard: None })
            }
            (Handle::Rlock(rlock), Subject::Peer(peer)) => Box::new(RlockMutex {
                rlock: rlock.clone(),
                key: name.to_string(),
                options: peer.rlock_options(),
                guard: None,
            }),
            (Handle::RedisLock(client), Subject::Peer(Peer::RedisLock)) => Box::new(RedisLockResource {
                lock: redis_lock::sync::MultiResourceLock::new(client).expect("redis-lock connection"),
                resources: vec![name.to_string()],
                id: None,
            }),
            _ => unreachable!("a process opened for {:?}", self.subject),
        }
    }
}

/// One thread's handle on what is contended for; it remembers what it holds.
pub(crate) trait Contender {
    /// Takes it if it is free now; whether it did.
    fn try_take(&mut self) -> bool;
    /// Waits until it has it.
    fn take(&mut self);
    /// Gives back what it holds.
    fn give_back(&mut self);
}

/// `try_take()` (which must succeed) then `give_back()`; returns how long the take took.
pub(crate) fn contender_pair(contender: &mut dyn Contender) -> Duration {
    let start = Instant::now();
    assert!(contender.try_take(), "an uncontended lock is free");
    let taken = start.elapsed();
    contender.give_back();
    taken
}

struct LibraryLock {
    lock: AnyLock,
    guard: Option<LockGuard>,
}

impl Contender for LibraryLock {
    fn try_take(&mut self) -> bool {
        self.guard = self.lock.try_lock().expect("try_lock");
        self.guard.is_some()
    }
    fn take(&mut self) {
        self.guard = Some(self.lock.lock().expect("lock()"));
    }
    fn give_back(&mut self) {
        self.guard.take().expect("held").unlock().expect("unlock");
    }
}

/// A contender for the one permit of a semaphore: `$name` holds a permit of a `$semaphore`
/// as a `$guard`. The two kinds of semaphore share no trait but are taken and given back
/// alike.
macro_rules! one_permit {
    ($name:ident, $semaphore:ty, $guard:ty) => {
        struct $name {
            semaphore: $semaphore,
            guard: Option<$guard>,
        }

        impl Contender for $name {
            fn try_take(&mut self) -> bool {
                self.guard = self.semaphore.try_acquire(1).expect("try_acquire(1)");
                self.guard.is_some()
            }
            fn take(&mut self) {
                self.guard = Some(self.semaphore.acquire(1).expect("acquire(1)"));
            }
            fn give_back(&mut self) {
                self.guard.take().expect("held").release().expect("release");
            }
        }
    };
}

one_permit!(OnePermit, Semaphore, SemaphoreGuard);
one_permit!(OneExpirablePermit, PermitExpirableSemaphore, PermitGuard);

struct RlockMutex {
    rlock: rlock::sync_lock::RLock,
    key: String,
    options: rlock::AcquireOptions,
    guard: Option<rlock::sync_lock::RLockGuard>,
}

impl Contender for RlockMutex {
    fn try_take(&mut self) -> bool {
        self.guard =
            self.rlock.try_acquire_mutex_with_options(&self.key, self.options.clone()).expect("rlock try_acquire");
        self.guard.is_some()
    }
    fn take(&mut self) {
        self.guard =
            Some(self.rlock.acquire_mutex_with_options(&self.key, self.options.clone()).expect("rlock acquire"));
    }
    fn give_back(&mut self) {
        self.guard.take().expect("held").release().expect("rlock release");
    }
}

struct RedisLockResource {
    lock: redis_lock::sync::MultiResourceLock,
    resources: Vec<String>,
    id: Option<String>,
}

impl Contender for RedisLockResource {
    fn try_take(&mut self) -> bool {
        self.id =
            self.lock.try_acquire(&self.resources, redis_lock::DEFAULT_EXPIRATION).expect("redis-lock try_acquire");
        self.id.is_some()
    }
    fn take(&mut self) {
        let id = self.lock.acquire_default(&self.resources).expect("redis-lock acquire");
        self.id = Some(id.expect("redis-lock acquired within its default timeout of 60 s"));
    }
    fn give_back(&mut self) {
        let id = self.id.take().expect("held");
        let released = self.lock.release(&id).expect("redis-lock release");
        assert_eq!(released, self.resources.len(), "redis-lock released every resource");
    }
}
