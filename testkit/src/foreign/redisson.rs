//! Redisson's own scripts, read out of a Redisson source checkout at test time (the
//! directory `REDLEASE_REDISSON_SRC` names), checked against the SHA1s docs/design.md
//! records, and sent with the keys and arguments Redisson's Java code gives them. Nothing
//! of Redisson's text is kept in this repository: without the variable there is nothing.

use std::path::{Path, PathBuf};

use redis::{Connection, RedisResult, Script};

use super::keys::{
    REENTRY_ERROR, UNLOCK, fair_deadlines, fair_queue, latch_channel, lock_channel, semaphore_channel, unlock_latch,
};
use super::{Acquire, FAIR_WAIT_MS, Foreign, LATCH_MS, LEASE_MS, Publish, Release, java, request_id};

/// The variable that names a Redisson source checkout (the repository's root).
pub const SOURCE_ENV: &str = "REDLEASE_REDISSON_SRC";

/// The scripts used, each by the Java class and method that holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Which {
    LockAcquire,
    LockRelease,
    NonReentrantAcquire,
    NonReentrantFairAcquire,
    FairRelease,
    SpinAcquire,
    SpinRelease,
    SemaphoreTryAcquire,
    SemaphoreReleaseIfExists,
    SemaphoreTrySetPermitsWithTtl,
    LatchCountDown,
    GroupAcquire,
    GroupRelease,
    GroupIsLocked,
}

const SCRIPTS: [(Which, &str, &str); 14] = [
    (Which::LockAcquire, "RedissonLock", "tryLockInnerAsync"),
    (Which::LockRelease, "RedissonLock", "unlockInnerAsync"),
    (Which::NonReentrantAcquire, "RedissonNonReentrantLock", "tryLockInnerAsync"),
    (Which::NonReentrantFairAcquire, "RedissonNonReentrantFairLock", "tryLockInnerAsync"),
    (Which::FairRelease, "RedissonFairLock", "unlockInnerAsync"),
    (Which::SpinAcquire, "RedissonSpinLock", "tryLockInnerAsync"),
    (Which::SpinRelease, "RedissonSpinLock", "unlockInnerAsync"),
    (Which::SemaphoreTryAcquire, "RedissonSemaphore", "tryAcquireAsync0"),
    (Which::SemaphoreReleaseIfExists, "RedissonSemaphore", "releaseIfExistsAsync"),
    (Which::SemaphoreTrySetPermitsWithTtl, "RedissonSemaphore", "trySetPermitsAsync"),
    (Which::LatchCountDown, "RedissonCountDownLatch", "countDownAsync"),
    (Which::GroupAcquire, "RedissonFasterMultiLock", "tryLockInnerAsync"),
    (Which::GroupRelease, "RedissonFasterMultiLock", "unlockInnerAsync"),
    (Which::GroupIsLocked, "RedissonFasterMultiLock", "isLockedAsync"),
];

/// Redisson's scripts, read from one checkout.
pub struct RedissonScripts {
    /// The checkout's version and commit, for the tests' messages.
    version: String,
    scripts: Vec<(Which, Script)>,
}

impl RedissonScripts {
    /// The scripts of the checkout `REDLEASE_REDISSON_SRC` names; `None` when it is unset.
    pub fn from_env() -> Result<Option<RedissonScripts>, String> {
        match std::env::var_os(SOURCE_ENV) {
            None => Ok(None),
            Some(root) if root.is_empty() => Ok(None),
            Some(root) => RedissonScripts::load(Path::new(&root)).map(Some),
        }
    }

    /// The scripts of the checkout at `root`, each the one of its method whose SHA1 is the
    /// one docs/design.md records: a script Redisson changed since is an error that says so.
    pub fn load(root: &Path) -> Result<RedissonScripts, String> {
        let sources = [root.join("redisson/src/main/java/org/redisson"), root.join("src/main/java/org/redisson")]
            .into_iter()
            .find(|dir| dir.join("RedissonLock.java").is_file())
            .ok_or_else(|| format!("{}: no redisson/src/main/java/org/redisson/RedissonLock.java", root.display()))?;
        let recorded = recorded_sha1s()?;
        let mut scripts = Vec::with_capacity(SCRIPTS.len());
        for (which, class, method) in SCRIPTS {
            let path: PathBuf = sources.join(format!("{class}.java"));
            let source = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            let name = format!("{class}.{method}");
            let sha1 = recorded
                .iter()
                .find(|(method, _)| *method == name)
                .map(|(_, sha1)| sha1.as_str())
                .ok_or_else(|| format!("docs/design.md records no SHA1 for {name} ({which:?})"))?;
            let found = java::scripts_in_method(&source, method).map_err(|e| format!("{}: {e}", path.display()))?;
            let script =
                found.iter().map(|text| Script::new(text)).find(|s| s.get_hash() == sha1).ok_or_else(|| {
                    let seen: Vec<String> = found.iter().map(|text| Script::new(text).get_hash().to_string()).collect();
                    format!(
                        "{name}: none of its scripts has the SHA1 docs/design.md records, {sha1} (found {seen:?}): \
                     Redisson changed it, and the layout peer and the docs need a look"
                    )
                })?;
            scripts.push((which, script));
        }
        Ok(RedissonScripts { version: describe(root), scripts })
    }

    fn script(&self, which: Which) -> &Script {
        let found = self.scripts.iter().find(|(w, _)| *w == which);
        &found.expect("`load` loads every one of SCRIPTS or fails").1
    }

    /// `RedissonLock`'s acquire and release, for the benchmark to send raw: the acquire
    /// takes `KEYS[1]` the lock, `ARGV` the lease (ms) and the owner; the release `KEYS` the
    /// lock, its channel and the request's latch, `ARGV` the unlock message, the lease, the
    /// owner, the publish command and the latch's lifetime (ms).
    pub fn lock_pair(&self) -> (Script, Script) {
        (self.script(Which::LockAcquire).clone(), self.script(Which::LockRelease).clone())
    }
}

/// The SHA1s docs/design.md records, by `Class.method`: the rows of its table of Redisson's
/// scripts.
fn recorded_sha1s() -> Result<Vec<(String, String)>, String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/design.md");
    let doc = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut rows = Vec::new();
    for line in doc.lines().filter(|l| l.starts_with('|')) {
        let quoted: Vec<&str> = line.split('`').skip(1).step_by(2).collect();
        let method = quoted.iter().find(|q| q.starts_with("Redisson") && q.contains('.'));
        let sha1 = quoted.iter().find(|q| q.len() == 40 && q.bytes().all(|b| b.is_ascii_hexdigit()));
        if let (Some(method), Some(sha1)) = (method, sha1) {
            rows.push((method.to_string(), sha1.to_string()));
        }
    }
    Ok(rows)
}

/// The checkout's version (its root `pom.xml`) and commit (`git rev-parse`), as known.
fn describe(root: &Path) -> String {
    let version = std::fs::read_to_string(root.join("pom.xml"))
        .ok()
        .and_then(|pom| {
            let start = pom.find("<version>")? + "<version>".len();
            let end = start + pom[start..].find("</version>")?;
            Some(pom[start..end].to_string())
        })
        .unwrap_or_else(|| "version unknown".into());
    let commit = std::process::Command::new("git")
        .arg("-C")
        .arg(root)
        .args(["rev-parse", "HEAD"])
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .unwrap_or_else(|| "commit unknown".into());
    format!("{version} at {commit}")
}

/// An acquire's reply: nil granted, a number busy for that long; a reentry refused.
fn acquired(reply: RedisResult<Option<i64>>) -> RedisResult<Acquire> {
    match reply {
        Ok(None) => Ok(Acquire::Granted),
        Ok(Some(ms)) => Ok(Acquire::Busy(ms)),
        Err(e) if e.to_string().contains(REENTRY_ERROR) => Ok(Acquire::Refused),
        Err(e) => Err(e),
    }
}

/// A release's reply: nil not held, 0 holds remain, 1 freed.
fn released(reply: Option<i64>) -> RedisResult<Release> {
    match reply {
        None => Ok(Release::NotHeld),
        Some(0) => Ok(Release::HoldsRemain),
        Some(1) => Ok(Release::Freed),
        Some(other) => Err((redis::ErrorKind::Client, "a release answered", other.to_string()).into()),
    }
}

impl Foreign for RedissonScripts {
    fn who(&self) -> String {
        format!("Redisson's own scripts ({})", self.version)
    }

    fn lock_acquire(&self, conn: &mut Connection, name: &str, owner: &str) -> RedisResult<Acquire> {
        acquired(self.script(Which::LockAcquire).key(name).arg(LEASE_MS).arg(owner).invoke(conn))
    }

    fn lock_release(&self, conn: &mut Connection, name: &str, owner: &str, publish: Publish) -> RedisResult<Release> {
        let reply = self
            .script(Which::LockRelease)
            .key(name)
            .key(lock_channel(name))
            .key(unlock_latch(name, &request_id()))
            .arg(UNLOCK)
            .arg(LEASE_MS)
            .arg(owner)
            .arg(publish.command())
            .arg(LATCH_MS)
            .invoke(conn)?;
        released(reply)
    }

    fn spin_acquire(&self, conn: &mut Connection, name: &str, owner: &str) -> RedisResult<Acquire> {
        acquired(self.script(Which::SpinAcquire).key(name).arg(LEASE_MS).arg(owner).invoke(conn))
    }

    fn spin_release(&self, conn: &mut Connection, name: &str, owner: &str) -> RedisResult<Release> {
        let reply = self
            .script(Which::SpinRelease)
            .key(name)
            .key(unlock_latch(name, &request_id()))
            .arg(LEASE_MS)
            .arg(owner)
            .arg(LATCH_MS)
            .invoke(conn)?;
        released(reply)
    }

    fn non_reentrant_acquire(&self, conn: &mut Connection, name: &str, owner: &str) -> RedisResult<Acquire> {
        acquired(
            self.script(Which::NonReentrantAcquire).key(name).arg(LEASE_MS).arg(owner).arg(REENTRY_ERROR).invoke(conn),
        )
    }

    fn non_reentrant_fair_acquire(
        &self,
        conn: &mut Connection,
        name: &str,
        owner: &str,
        now_ms: u64,
    ) -> RedisResult<Acquire> {
        acquired(
            self.script(Which::NonReentrantFairAcquire)
                .key(name)
                .key(fair_queue(name))
                .key(fair_deadlines(name))
                .arg(LEASE_MS)
                .arg(owner)
                .arg(FAIR_WAIT_MS)
                .arg(now_ms)
                .arg(REENTRY_ERROR)
                .invoke(conn),
        )
    }

    fn fair_release(
        &self,
        conn: &mut Connection,
        name: &str,
        owner: &str,
        now_ms: u64,
        publish: Publish,
    ) -> RedisResult<Release> {
        let reply = self
            .script(Which::FairRelease)
            .key(name)
            .key(fair_queue(name))
            .key(fair_deadlines(name))
            .key(lock_channel(name))
            .key(unlock_latch(name, &request_id()))
            .arg(UNLOCK)
            .arg(LEASE_MS)
            .arg(owner)
            .arg(now_ms)
            .arg(publish.command())
            .arg(LATCH_MS)
            .invoke(conn)?;
        released(reply)
    }

    fn semaphore_try_acquire(&self, conn: &mut Connection, name: &str, permits: u32) -> RedisResult<bool> {
        let taken: i64 = self.script(Which::SemaphoreTryAcquire).key(name).arg(permits).invoke(conn)?;
        Ok(taken == 1)
    }

    fn latch_count_down(&self, conn: &mut Connection, name: &str, publish: Publish) -> RedisResult<()> {
        let script = self.script(Which::LatchCountDown);
        let _: redis::Value =
            script.key(name).key(latch_channel(name)).arg(UNLOCK).arg(publish.command()).invoke(conn)?;
        Ok(())
    }

    fn semaphore_release_if_exists(
        &self,
        conn: &mut Connection,
        name: &str,
        permits: u32,
        publish: Publish,
    ) -> RedisResult<bool> {
        let given: i64 = self
            .script(Which::SemaphoreReleaseIfExists)
            .key(name)
            .key(semaphore_channel(name))
            .arg(permits)
            .arg(publish.command())
            .invoke(conn)?;
        Ok(given == 1)
    }

    fn semaphore_try_set_permits_with_ttl(
        &self,
        conn: &mut Connection,
        name: &str,
        permits: u32,
        ttl_ms: u64,
        publish: Publish,
    ) -> RedisResult<bool> {
        let set: i64 = self
            .script(Which::SemaphoreTrySetPermitsWithTtl)
            .key(name)
            .key(semaphore_channel(name))
            .arg(permits)
            .arg(publish.command())
            .arg(ttl_ms)
            .invoke(conn)?;
        Ok(set == 1)
    }

    fn group_acquire(
        &self,
        conn: &mut Connection,
        group: &str,
        owner: &str,
        now_ms: u64,
        fields: &[&str],
    ) -> RedisResult<Acquire> {
        acquired(
            self.script(Which::GroupAcquire).key(group).arg(LEASE_MS).arg(now_ms).arg(owner).arg(fields).invoke(conn),
        )
    }

    fn group_release(
        &self,
        conn: &mut Connection,
        group: &str,
        owner: &str,
        now_ms: u64,
        fields: &[&str],
        publish: Publish,
    ) -> RedisResult<Release> {
        let reply = self
            .script(Which::GroupRelease)
            .key(group)
            .key(lock_channel(group))
            .key(unlock_latch(group, &request_id()))
            .arg(owner)
            .arg(UNLOCK)
            .arg(LEASE_MS)
            .arg(publish.command())
            .arg(LATCH_MS)
            .arg(now_ms)
            .arg(fields)
            .invoke(conn)?;
        released(reply)
    }

    fn group_is_locked(&self, conn: &mut Connection, group: &str, now_ms: u64, fields: &[&str]) -> RedisResult<bool> {
        let locked: i64 = self.script(Which::GroupIsLocked).key(group).arg(now_ms).arg(fields).invoke(conn)?;
        Ok(locked == 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every script the tests send has its SHA1 in docs/design.md's table, once.
    #[test]
    fn the_docs_record_one_sha1_per_script() {
        let recorded = recorded_sha1s().unwrap();
        for (which, class, method) in SCRIPTS {
            let name = format!("{class}.{method}");
            let rows = recorded.iter().filter(|(m, _)| *m == name).count();
            assert_eq!(rows, 1, "{which:?}: {name} in docs/design.md");
        }
        assert_eq!(recorded.len(), SCRIPTS.len(), "no row the test kit does not use: {recorded:?}");
    }
}
