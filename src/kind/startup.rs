//! What a new client asks of its server once: the scripts loaded, and whether its user may
//! run every command they use.

use crate::base::scripts;
use crate::transport::Conn;

/// The key on which the user's command permissions are checked (nothing is written).
const PERMISSION_PROBE_KEY: &str = "redlease:permission-check";

/// Loads every script (one round trip for all of them) and returns the commands the
/// scripts use that the user may not run (see `lua/check_permissions.lua`; empty when it
/// cannot tell).
pub(crate) fn prepare_server(conn: &mut Conn) -> redis::RedisResult<Vec<String>> {
    let pubsub = conn.pubsub();
    let mut load = redis::pipe();
    for script in scripts::all() {
        load.cmd("SCRIPT").arg("LOAD").arg(&*script.code(pubsub)).ignore();
    }
    load.query::<()>(conn)?;
    scripts::CHECK_PERMISSIONS.on(pubsub).arg(PERMISSION_PROBE_KEY).invoke(conn)
}
