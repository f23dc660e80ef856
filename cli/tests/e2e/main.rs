//! End-to-end tests of the `redlease` binary: real processes against real `redis-server`s
//! (redlease-testkit). Every process a test starts is killed and reaped when the test ends.

mod bad_input;
mod documented;
mod election;
mod environment;
mod exclusion;
mod exit_codes;
mod lost_lease;
mod permits;
mod signals;
mod status;
mod stop_in_time;
mod support;
mod terminal;
mod top;
mod urls;
