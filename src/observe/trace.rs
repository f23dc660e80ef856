//! Tracing through the `tracing` crate, with the `tracing` feature: spans around acquires,
//! releases and renewal batches, events for what [`LockEvents`](crate::LockEvents) reports
//! and for failovers followed and transient errors retried ([`guide::design`](crate::guide::design#tracing), "Tracing",
//! says what, at which levels, with which fields).
//!
//! The rest of the crate names `tracing` only through these macros. Without the feature
//! each expands to its arguments inside an `if false` block: they are type-checked and
//! count as used (no warning in either build), never evaluated, and the compiler drops
//! them; a span is then the zero-sized `Off`. Field values are typed (`&str`, integers,
//! floats, `bool`); those after a `;` in [`event!`] are shown with `Display`'s alternate
//! form (`{:#}`: an error with its cause).

/// A span of `name` at `LEVEL` (`TRACE` … `ERROR`), not entered: `span!(DEBUG, "acquire",
/// lock = name; outcome, waited_ms)`. The names after `;` are fields left empty, for
/// [`record!`] to fill in when the outcome is known.
#[cfg(feature = "tracing")]
macro_rules! span {
    ($level:ident, $name:literal $(, $field:ident = $value:expr)* $(; $($later:ident),+)?) => {
        ::tracing::span!(
            ::tracing::Level::$level,
            $name
            $(, $field = $value)*
            $($(, $later = ::tracing::field::Empty)+)?
        )
    };
}

#[cfg(not(feature = "tracing"))]
macro_rules! span {
    ($level:ident, $name:literal $(, $field:ident = $value:expr)* $(; $($later:ident),+)?) => {{
        if false {
            let _ = ($(&$value,)*);
        }
        $crate::observe::trace::Off
    }};
}

/// Runs `body` inside `span` (entered on this thread for the time of it).
#[cfg(feature = "tracing")]
macro_rules! within {
    ($span:expr, $body:expr) => {
        $span.in_scope(|| $body)
    };
}

#[cfg(not(feature = "tracing"))]
macro_rules! within {
    ($span:expr, $body:expr) => {{
        let _ = &$span;
        $body
    }};
}

/// Fills in fields of `span` that [`span!`] left empty: `record!(span, outcome = "busy")`.
#[cfg(feature = "tracing")]
macro_rules! record {
    ($span:expr $(, $field:ident = $value:expr)+) => {{
        let span = &$span;
        // The values are worked out only for a span some subscriber wants.
        if !span.is_disabled() {
            $(span.record(stringify!($field), $value);)+
        }
    }};
}

#[cfg(not(feature = "tracing"))]
macro_rules! record {
    ($span:expr $(, $field:ident = $value:expr)+) => {
        if false {
            let _ = (&$span, $(&$value,)+);
        }
    };
}

/// An event at `LEVEL` with a message: `event!(WARN, "lease lost", lock = name)`; fields
/// after a `;` are shown with `Display`'s alternate form, `{:#}` (`event!(WARN, "renewal failed"; error = err)`).
#[cfg(feature = "tracing")]
macro_rules! event {
    ($level:ident, $message:literal $(, $field:ident = $value:expr)* $(; $($shown:ident = $display:expr),+)?) => {
        ::tracing::event!(
            ::tracing::Level::$level,
            $($field = $value,)*
            // The alternate form: an error's whole chain, on one line.
            $($($shown = %format_args!("{:#}", $display),)+)?
            $message
        )
    };
}

#[cfg(not(feature = "tracing"))]
macro_rules! event {
    ($level:ident, $message:literal $(, $field:ident = $value:expr)* $(; $($shown:ident = $display:expr),+)?) => {
        if false {
            let _ = ($(&$value,)* $($(&$display,)+)?);
        }
    };
}

pub(crate) use {event, record, span, within};

/// What [`span!`] makes without the feature: nothing.
#[cfg(not(feature = "tracing"))]
#[derive(Clone, Copy)]
pub(crate) struct Off;

/// What [`span!`] makes, for a function that takes one.
#[cfg(feature = "tracing")]
pub(crate) type Span = ::tracing::Span;

/// What [`span!`] makes, for a function that takes one.
#[cfg(not(feature = "tracing"))]
pub(crate) type Span = Off;

/// Counts the calls of a closure, for a span's field (an acquire's attempts). Without the
/// feature it counts nothing and is zero-sized: [`Tally::counting`] hands the closure back
/// as it is.
#[derive(Default)]
pub(crate) struct Tally {
    #[cfg(feature = "tracing")]
    calls: std::cell::Cell<u64>,
}

impl Tally {
    /// `f`, counted at each call.
    pub(crate) fn counting<R>(&self, mut f: impl FnMut() -> R) -> impl FnMut() -> R {
        move || {
            #[cfg(feature = "tracing")]
            self.calls.set(self.calls.get() + 1);
            f()
        }
    }

    /// The calls counted.
    #[cfg(feature = "tracing")]
    pub(crate) fn calls(&self) -> u64 {
        self.calls.get()
    }

    /// Nothing is counted without the feature.
    #[cfg(not(feature = "tracing"))]
    pub(crate) fn calls(&self) -> u64 {
        0
    }
}

/// A duration as a span's or an event's field: milliseconds, with a fraction.
pub(crate) fn millis(duration: std::time::Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}
