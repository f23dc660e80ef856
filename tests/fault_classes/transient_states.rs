//! Fault class 9: a transient server state taken for a fatal one.

use std::thread;
use std::time::{Duration, Instant};

use super::{SLACK, client_at};
use crate::support::server::RedisServer;

/// Runs, on a thread of its own, a script that keeps `server` busy for `spin` by its own
/// clock (every other client meanwhile gets `BUSY` once `busy-reply-threshold` passes).
fn spin_a_script(server: &RedisServer, spin: Duration) -> thread::JoinHandle<i64> {
    let url = server.url();
    let micros = spin.as_micros();
    thread::spawn(move || {
        let mut conn = redis::Client::open(url).unwrap().get_connection().unwrap();
        let script = "local t = redis.call('TIME') local until_ = t[1] * 1000000 + t[2] + tonumber(ARGV[1]) \
                      repeat t = redis.call('TIME') until t[1] * 1000000 + t[2] >= until_ return 1";
        redis::cmd("EVAL").arg(script).arg(0).arg(micros.to_string()).query::<i64>(&mut conn).expect("the spin ends")
    })
}

/// Redis busy with another client's long script answers every other command `BUSY` until
/// it ends (`busy-reply-threshold` passed): a state that passes by itself, in which nothing
/// ran. An acquire, an unlock, a semaphore's acquire (a command that must not run twice)
/// and a query each meet it, and each rides it out within the retry budget: no error, and
/// the lock and the permit are had once the script is done. An error met in such a state
/// says so (`is_transient`).
///
/// Breaks if a transient refusal is returned as a plain `Redis` error (every call below
/// failed with "BUSY Redis is busy running a script" before), if a command that must not
/// run twice is not tried again after a refusal that ran nothing, or if `is_transient`
/// does not tell it.
#[test]
fn calls_ride_out_a_busy_script_and_the_error_says_it_is_transient() {
    let server = RedisServer::start();
    // Redis 7's name for it; Redis 6 calls it `lua-time-limit`.
    let mut conn = server.conn();
    redis::cmd("CONFIG")
        .arg("SET")
        .arg("busy-reply-threshold")
        .arg(50)
        .query::<()>(&mut conn)
        .or_else(|_| redis::cmd("CONFIG").arg("SET").arg("lua-time-limit").arg(50).query::<()>(&mut conn))
        .unwrap();
    let client = client_at(&server.url(), |b| b.retry_budget(Duration::from_secs(5)));
    let semaphore = client.semaphore("busy-sem");
    assert!(semaphore.try_set_permits(1).expect("set"));
    let lock = client.lock("busy");
    let guard = lock.try_lock().expect("free").expect("granted");
    // Another client's script spins for 1.5 s (by the server's clock).
    let busy = spin_a_script(&server, Duration::from_millis(1500));
    thread::sleep(Duration::from_millis(200));
    let started = Instant::now();
    guard.unlock().expect("the unlock rides out BUSY");
    let regranted = lock.try_lock().expect("the acquire rides out BUSY");
    assert!(regranted.is_some(), "free again");
    let permit = semaphore.try_acquire(1).expect("the semaphore rides out BUSY").expect("the permit is free");
    assert_eq!(semaphore.available_permits().expect("a query rides it out"), 0, "taken once, not twice");
    drop(permit);
    let took = started.elapsed();
    assert!(took < Duration::from_secs(5) + SLACK, "within the retry budget: {took:?}");
    assert_eq!(busy.join().expect("spin"), 1);
    drop(regranted);
    // Past the budget the error is returned, and says it is transient.
    let impatient = client_at(&server.url(), |b| b.retry_budget(Duration::from_millis(100)));
    let busy = spin_a_script(&server, Duration::from_secs(1));
    thread::sleep(Duration::from_millis(200));
    let err = impatient.lock("busy-2").try_lock().expect_err("busy past the budget");
    assert!(err.is_transient(), "{err}");
    assert!(!err.is_invalid_input() && !err.is_permission_denied(), "{err}");
    busy.join().expect("spin");
}
