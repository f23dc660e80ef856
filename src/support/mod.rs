//! What every floor above leans on to run: the settings and their checks, starting and
//! joining background threads, one call per item on scoped threads, and interrupting a
//! thread's waits. The foundation floor, beside [`observe`](crate::observe)
//! ([`guide::design`](crate::guide::design#layers), "Layers").

pub(crate) mod background;
pub(crate) mod config;
pub(crate) mod fan_out;
pub(crate) mod interrupt;
