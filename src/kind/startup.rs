//! What a new client asks of its server once: the scripts loaded, and whether its user may
//! run every command they use.

use crate::scripts;

/// The key on which the user's command permissions are checked (nothing is written).
const PERMISSION_PROBE_KEY: &str = "redlease:permission-check";

/// Loads every script and returns the commands the scripts use that the user may not run
/// (see `lua/check_permissions.lua`; empty when it cannot tell).
pub(crate) fn prepare_server(conn: &mut redis::Connection) -> redis::RedisResult<Vec<String>> {
    for script in scripts::all() {
        script.load(conn)?;
    }
    scripts::CHECK_PERMISSIONS.arg(PERMISSION_PROBE_KEY).invoke(conn)
}
