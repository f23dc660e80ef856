//! Starting and stopping the client's background threads.

use std::thread::JoinHandle;

use parking_lot::Mutex;

use crate::base::error::{Error, ErrorKind, Result};

/// A named background thread, joined by [`join`](Background::join).
pub(crate) struct Background {
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Background {
    pub(crate) fn spawn(name: &str, body: impl FnOnce() + Send + 'static) -> Result<Background> {
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(body)
            .map_err(|e| Error::new(ErrorKind::System, format!("the {name} thread could not be started: {e}")))?;
        Ok(Background { thread: Mutex::new(Some(thread)) })
    }

    /// Waits for the thread to end (the caller has told it to). Never joins itself.
    pub(crate) fn join(&self) {
        if let Some(thread) = self.thread.lock().take()
            && thread.thread().id() != std::thread::current().id()
        {
            let _ = thread.join();
        }
    }
}
