//! Group locks: many values of one group taken all or none in one script call (Redisson's
//! `RedissonFasterMultiLock` layout), through the wait loop the locks use; the values'
//! lease, renewed by the same watchdog; and the release.
//!
//! Every attempt has an owner of its own (`<client uuid>:<n>`, a number no thread has): an
//! attempt whose reply is lost is undone behind it by releasing that owner's values, which
//! touches nothing of any other attempt, so undoing is always safe and a late undo can never
//! take a later grant away. The guard that a grant gives is no thread's.

use std::cell::Cell;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::base::error::{Context, Error, ErrorKind, Result};
use crate::base::highway;
use crate::base::keys;
use crate::engine::acquire::{Attempt, Wait, ready, wait_for};
use crate::engine::core::Engine;
use crate::engine::grant::{GrantAttempt, Sending};
use crate::engine::lease::{Lease, LeaseState, Renews, Term};
use crate::engine::release::release_outcome;
use crate::engine::retry::with_retries;
use crate::engine::undos;
use crate::kind::Reply;
use crate::kind::group::{self, Released};
use crate::kind::wake;
use crate::observe::activity::Active;
use crate::observe::events::Events;
use crate::observe::trace;
use crate::support::interrupt;

/// Most values one group lock takes. One script call goes through them all while Redis
/// serves nothing else, at about 3.5 µs of Redis's time per value: 1,000 values keep it
/// busy about 3.5 ms per acquire and as long per release (10,000 took 33 ms; see
/// [`guide::performance`](crate::guide::performance), step 12).
pub const MAX_GROUP_VALUES: usize = 1_000;

/// The values of a group lock, as its scripts take them: each value's field, concatenated;
/// or what is wrong with them (reported by every call, before anything is sent).
#[derive(Clone, Debug)]
pub(crate) struct Values {
    fields: Result<Arc<str>, String>,
    count: usize,
}

impl Values {
    /// The fields of `values`, checked: at least one, at most [`MAX_GROUP_VALUES`], no
    /// value twice.
    pub(crate) fn new<V: AsRef<[u8]>>(values: impl IntoIterator<Item = V>) -> Values {
        let values: Vec<V> = values.into_iter().collect();
        let count = values.len();
        let fields = if values.is_empty() {
            Err("a group lock needs at least one value".to_owned())
        } else if count > MAX_GROUP_VALUES {
            Err(format!(
                "{count} values: a group lock takes at most {MAX_GROUP_VALUES} (one script call blocks Redis for all of them)"
            ))
        } else {
            let mut seen = HashSet::with_capacity(count);
            match values.iter().position(|v| !seen.insert(v.as_ref())) {
                Some(at) => {
                    let first = values.iter().position(|v| v.as_ref() == values[at].as_ref()).unwrap_or(0);
                    Err(format!("value {} is value {} again: each value may be named once", at + 1, first + 1))
                }
                None => Ok(values.iter().map(|v| highway::group_field(v.as_ref())).collect::<String>().into()),
            }
        };
        Values { fields, count }
    }

    /// How many values.
    pub(crate) fn count(&self) -> usize {
        self.count
    }

    fn fields(&self, group: &str) -> Result<&str> {
        self.fields.as_deref().map_err(|problem| Error::invalid(problem.clone()).on_lock(group))
    }
}

/// The checks every call on a group lock makes before it sends anything: the client runs,
/// the group's name and the values are valid. The fields.
fn check<'a>(engine: &Engine, group: &str, values: &'a Values) -> Result<&'a str> {
    ready(engine, group)?;
    values.fields(group)
}

/// One guard's hold of a group lock's values.
pub(crate) struct GroupHold {
    engine: Arc<Engine>,
    lease: Arc<Lease>,
    term: Term,
    count: usize,
    /// When they were taken, for the hold-time histogram.
    since: Instant,
    /// Counts the client active (it announces itself) until the values are let go.
    _active: Active,
}

/// Takes every value of `values` in the group `group`, with `lease` (`None`: the
/// watchdog's, renewed while the guard lives), waiting as `wait` says.
pub(crate) fn acquire(
    engine: &Arc<Engine>,
    group: &Arc<str>,
    values: &Values,
    lease: Option<Duration>,
    wait: Wait,
) -> Result<Option<GroupHold>> {
    let fields = check(engine, group, values)?;
    // Counts the client active from here to the end of the hold it may get.
    let active = engine.config().events.active();
    let (lease_millis, watchdog) = match lease {
        Some(lease) => (keys::lease_millis("lease", lease).on_lock(group)?, false),
        None => (engine.watchdog_millis(), true),
    };
    let command_timeout = engine.config().command_timeout;
    let attempt = || {
        let owner = engine.fresh_owner();
        let sent = Instant::now();
        // A reply that does not come in time: this attempt's values are released behind
        // it, on its connection (only this owner's fields are touched).
        let mut undo = |conn| {
            let (theirs, who, fields) = (group.to_string(), owner.clone(), fields.to_owned());
            undos::hand_off(engine.undos(), group, &owner, conn, move |mut conn| {
                if conn.set_read_timeout(Some(command_timeout)).is_ok() {
                    let _ = group::release(&mut conn, &theirs, &who, &fields);
                }
            });
        };
        let granted = engine.attempt_grant(GrantAttempt {
            what: "acquiring",
            key: group,
            sending: Sending::HandingOff(Some(&mut undo)),
            send: &|conn| group::acquire(conn, group, &owner, fields, lease_millis),
            is_granted: |reply| matches!(reply, Reply::Granted { .. }),
            // Replica-synced, as the locks' grants; a grant that cannot be trusted is
            // released where it was made. After a failed confirmation, not here: a timeout
            // leaves it to the hand-off, a broken connection to the release of an uncertain
            // attempt, and an error reply to the values' lease, which runs out.
            take_back: &|conn| drop(group::release(conn, group, &owner, fields)),
            undone_elsewhere: &|_| true,
            // The master the client follows now may have it from replication.
            superseded: &|| release_quietly(engine, group, &owner, fields),
            uncertain: &|| release_quietly(engine, group, &owner, fields),
        });
        match granted.on_lock(group)? {
            (Reply::Granted { .. }, _) => Ok(Attempt::Acquired((sent, owner))),
            (Reply::Busy { ttl }, _) => Ok(Attempt::Held { ttl }),
        }
    };
    let taken = wait_for(engine, group, "group", || (keys::lock_channel(group), &wake::EVERYONE, 1), wait, attempt);
    let Some((sent, owner)) = taken.on_lock(group)? else {
        return Ok(None);
    };
    // Granted in the same instant as an interrupt came: given back, as if the wait had
    // ended first.
    if wait.waits() && interrupt::take() {
        release_quietly(engine, group, &owner, fields);
        return Err(Error::interrupted().on_lock(group));
    }
    let renews = Renews::Group { owner, fields: fields.to_owned() };
    let lease = Arc::new(Lease::new(Arc::clone(group), renews, engine.watchdog_span()));
    let term = engine.add_hold(&lease, sent, lease_millis, watchdog);
    let since = Instant::now();
    Ok(Some(GroupHold { engine: Arc::clone(engine), lease, term, count: values.count(), since, _active: active }))
}

/// Releases `owner`'s values, best effort (an undo: nobody waits for its outcome).
fn release_quietly(engine: &Engine, group: &str, owner: &str, fields: &str) {
    let _ = engine.pool_for(group).run("releasing", |conn| group::release(conn, group, owner, fields));
}

/// How many of `values` someone holds now.
pub(crate) fn held(engine: &Engine, group: &str, values: &Values) -> Result<u64> {
    let fields = check(engine, group, values)?;
    with_retries(engine, None, |_| {
        engine.pool_for(group).run("checking the group", |conn| group::held(conn, group, fields))
    })
    .on_lock(group)
}

/// Releases `values` whoever holds them, and wakes the group's waiters: whether any was
/// held. Their holders learn of the loss at their next renewal.
pub(crate) fn force_unlock(engine: &Engine, group: &str, values: &Values) -> Result<bool> {
    let fields = check(engine, group, values)?;
    // Sent again only when it never left: a second send would find nothing and answer
    // `false` for values the first one released.
    with_retries(engine, None, |_| {
        engine.pool_for(group).run_once("force-unlocking", |conn| group::force_unlock(conn, group, fields))
    })
    .map(|held| held > 0)
    .on_lock(group)
}

impl GroupHold {
    /// The lease's state as this client knows it (no I/O).
    pub(crate) fn state(&self) -> LeaseState {
        self.lease.state()
    }

    /// The values' lease.
    pub(crate) fn lease(&self) -> &Arc<Lease> {
        &self.lease
    }

    /// The group's name.
    pub(crate) fn group(&self) -> &str {
        self.lease.name()
    }

    /// The owner the values are held under.
    pub(crate) fn owner(&self) -> &str {
        self.held().0
    }

    /// The owner and the values' fields, concatenated.
    fn held(&self) -> (&str, &str) {
        match self.lease.renews() {
            Renews::Group { owner, fields } => (owner, fields),
            Renews::Hash { .. } | Renews::Permits(_) => ("", ""),
        }
    }

    /// How many values are held.
    pub(crate) fn count(&self) -> usize {
        self.count
    }

    /// The event hook of the client that holds them.
    pub(crate) fn events(&self) -> Events {
        self.engine.config().events.clone()
    }

    /// Releases the values. `Err(NotHeld)` when they were lost (the lease ran out, or
    /// someone force-unlocked or took a value): reported once as `lease_lost`; nothing is
    /// sent when that was known before. Tried again within the retry budget, up to the
    /// lease's validity deadline (the release touches only this owner's fields, so a
    /// second send does no harm; one that then finds a value free takes it for released).
    pub(crate) fn release(self) -> Result<()> {
        let span =
            trace::span!(DEBUG, "release", lock = self.group(), kind = "group", client = self.engine.id(); outcome);
        let result = trace::within!(span, self.release_untraced());
        trace::record!(span, outcome = release_outcome(&result));
        result
    }

    fn release_untraced(self) -> Result<()> {
        let engine = &self.engine;
        let group = self.group();
        engine.config().events.held(group, "group", self.since.elapsed());
        engine.check_running().on_lock(group)?;
        let released = engine.release_hold(&self.lease, self.term);
        if released.lost {
            return Err(Error::new(
                ErrorKind::NotHeld,
                "the group's lease was lost before the release; nothing was sent",
            )
            .on_lock(group));
        }
        let valid_until = released.valid_until;
        let (owner, fields) = self.held();
        // Whether a send may have gone through without its reply being read.
        let sends = Cell::new(0u32);
        let found = with_retries(engine, valid_until, |_| {
            engine.pool_for(group).run("releasing", |conn| {
                sends.set(sends.get() + 1);
                group::release(conn, group, owner, fields)
            })
        })
        .on_lock(group)?;
        match lost(found, sends.get() > 1) {
            None => Ok(()),
            Some(why) => {
                self.lease.lost(&engine.config().events);
                Err(Error::new(ErrorKind::NotHeld, why).on_lock(group))
            }
        }
    }
}

/// Whether a release's findings mean the values were lost while held, and how. `resent`:
/// an earlier send may have released them already, so a value found free was.
fn lost(found: Released, resent: bool) -> Option<String> {
    let Released { released, late, free, taken } = found;
    let free_lost = if resent { 0 } else { free };
    (late + free_lost + taken > 0).then(|| {
        format!(
            "{} of {} values were lost before the release (past their lease: {late}, free: {free_lost}, another owner's: {taken})",
            late + free_lost + taken,
            released + late + free + taken
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_values_are_caught_before_anything_is_sent() {
        let problem = |values: Values| values.fields.err().unwrap_or_default();
        assert!(problem(Values::new(Vec::<&str>::new())).contains("at least one value"));
        assert!(problem(Values::new(["a", "b", "a"])).contains("value 3 is value 1 again"));
        let many: Vec<String> = (0..=MAX_GROUP_VALUES).map(|n| n.to_string()).collect();
        assert!(problem(Values::new(&many)).contains("at most"));
        let fine = Values::new(["Jack_001", "Mary_002"]);
        assert_eq!(fine.count(), 2);
        assert_eq!(fine.fields.as_deref().unwrap(), "7pNoDdizVy2xY792MaFv+wkIX2DFOX4IWct7G7K6tV9A");
    }

    #[test]
    fn a_release_tells_a_loss_from_a_release_sent_twice() {
        let all = Released { released: 3, ..Released::default() };
        assert_eq!(lost(all, false), None);
        let freed_by_a_lost_reply = Released { released: 1, free: 2, ..Released::default() };
        assert_eq!(lost(freed_by_a_lost_reply, true), None, "an earlier send released them");
        assert!(lost(freed_by_a_lost_reply, false).is_some(), "on a first send, a free value was lost");
        let taken = Released { released: 2, taken: 1, ..Released::default() };
        assert!(lost(taken, true).unwrap().contains("another owner's: 1"));
        let late = Released { late: 1, ..Released::default() };
        assert!(lost(late, true).is_some(), "past its lease is a loss whatever was sent");
    }
}
