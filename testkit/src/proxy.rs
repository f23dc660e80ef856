//! `Proxy`: an in-test TCP proxy in front of a server, for fault injection (latency,
//! black hole, lost replies, cut connections, refused connections, one frozen connection).
//!
//! Each proxied connection has one thread per direction. A direction's thread reads a
//! chunk at time `t` and writes it at `t + latency` through its own FIFO delay queue,
//! reading further chunks while earlier ones wait, so latency is added to every chunk
//! without serialising chunks behind each other's full delay.

use std::collections::{HashMap, VecDeque};
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

const ACCEPT_POLL: Duration = Duration::from_millis(5);
const UPSTREAM_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
const BUF_SIZE: usize = 16 * 1024;

/// A TCP proxy listening on `127.0.0.1:0`, forwarding to one upstream address.
/// Dropping it stops accepting, closes every connection and joins all its threads.
pub struct Proxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
}

struct Shared {
    upstream: SocketAddr,
    latency_nanos: AtomicU64,
    blackhole: AtomicBool,
    drop_replies: AtomicBool,
    /// A request whose reply is to be discarded ([`Proxy::drop_reply_to`]), until one
    /// containing it passes.
    reply_to_drop: Mutex<Option<Vec<u8>>>,
    /// Server→client chunks discarded because `drop_replies` was on, or because they
    /// answered the request `reply_to_drop` named.
    replies_dropped: AtomicU64,
    /// Client→server chunks forwarded.
    requests_forwarded: AtomicU64,
    requests_delayed: AtomicU64,
    /// While set, a new connection is closed as soon as it is accepted, never forwarded.
    refusing: AtomicBool,
    /// Source addresses whose connections are frozen, those open now and those made later.
    frozen_sources: Mutex<Vec<IpAddr>>,
    /// Server→client chunks still to forward before a connection is cut (`-1`: off).
    cut_after: AtomicI64,
    stopping: AtomicBool,
    next_id: AtomicU64,
    /// [`Proxy::cut_all`]s so far: a connection accepted before a cut and registered after
    /// it (its upstream connect ran meanwhile) is cut too.
    cuts: AtomicU64,
    conns: Mutex<HashMap<u64, Arc<Conn>>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

/// One proxied connection: the client side and the upstream side.
struct Conn {
    id: u64,
    client: TcpStream,
    server: TcpStream,
    closed: AtomicBool,
    /// While set, bytes in both directions of this connection are read and discarded.
    frozen: AtomicBool,
    /// Direction threads still running.
    live: AtomicUsize,
    /// The next server→client chunk is discarded: it answers the request
    /// [`Proxy::drop_reply_to`] named.
    drop_next_reply: AtomicBool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    ClientToServer,
    ServerToClient,
}

impl Proxy {
    /// Starts a proxy to `upstream` on a free loopback port.
    pub fn start(upstream: SocketAddr) -> Proxy {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("proxy: bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("proxy: local_addr");
        listener.set_nonblocking(true).expect("proxy: set_nonblocking");
        let shared = Arc::new(Shared {
            upstream,
            latency_nanos: AtomicU64::new(0),
            blackhole: AtomicBool::new(false),
            drop_replies: AtomicBool::new(false),
            reply_to_drop: Mutex::new(None),
            replies_dropped: AtomicU64::new(0),
            requests_forwarded: AtomicU64::new(0),
            requests_delayed: AtomicU64::new(0),
            refusing: AtomicBool::new(false),
            frozen_sources: Mutex::new(Vec::new()),
            cut_after: AtomicI64::new(-1),
            stopping: AtomicBool::new(false),
            next_id: AtomicU64::new(0),
            cuts: AtomicU64::new(0),
            conns: Mutex::new(HashMap::new()),
            threads: Mutex::new(Vec::new()),
        });
        let acceptor = {
            let shared = shared.clone();
            thread::Builder::new()
                .name(format!("proxy-accept-{}", addr.port()))
                .spawn(move || accept_loop(listener, shared))
                .expect("proxy: spawn acceptor")
        };
        Proxy { addr, shared, acceptor: Some(acceptor) }
    }

    /// The address clients connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `redis://127.0.0.1:PORT/` for the proxy's own port.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.addr.port())
    }

    /// The upstream address this proxy forwards to.
    pub fn upstream(&self) -> SocketAddr {
        self.shared.upstream
    }

    /// Delay added to every chunk in each direction (about twice this per round trip).
    /// Order is preserved. Applies to chunks read from now on, on existing and new
    /// connections.
    pub fn set_latency(&self, one_way: Duration) {
        let nanos = u64::try_from(one_way.as_nanos()).unwrap_or(u64::MAX);
        self.shared.latency_nanos.store(nanos, Ordering::SeqCst);
    }

    /// While on, connections stay open (and new ones are accepted), but bytes in both
    /// directions are read and discarded (also those still waiting in a delay queue).
    pub fn set_blackhole(&self, on: bool) {
        self.shared.blackhole.store(on, Ordering::SeqCst);
    }

    /// While on, client→server bytes are forwarded but server→client bytes are read
    /// and discarded.
    pub fn set_drop_replies(&self, on: bool) {
        self.shared.drop_replies.store(on, Ordering::SeqCst);
    }

    /// Discards the reply to the next request that contains `needle` (its first chunk: a
    /// small reply is one), on whichever connection it comes; everything else, the retry
    /// of that request included, is forwarded. Exactly one reply is lost, with no thread
    /// of the test racing the client's retry to let replies through again, and no other
    /// reply (a background write's) lost in its place.
    pub fn drop_reply_to(&self, needle: &[u8]) {
        *lock(&self.shared.reply_to_drop) = Some(needle.to_vec());
    }

    /// Server→client chunks discarded so far because [`Proxy::set_drop_replies`] was on
    /// (or [`Proxy::drop_reply_to`] named their request). A
    /// test that turns dropping off once a request has run waits for this to grow too: the
    /// server carries a request out before its reply reaches the proxy, so "it ran" alone
    /// does not mean its reply was lost.
    pub fn replies_dropped(&self) -> u64 {
        self.shared.replies_dropped.load(Ordering::SeqCst)
    }

    /// Client→server chunks forwarded so far, on every connection. A client that waits for
    /// each reply before it writes again sends one chunk per round trip (a pipeline, one
    /// write, is one chunk): what this counts is round trips.
    pub fn requests_forwarded(&self) -> u64 {
        self.shared.requests_forwarded.load(Ordering::SeqCst)
    }

    /// Client→server chunks read so far that waited in a delay queue (a latency was set,
    /// or earlier chunks were still waiting): a test that lifts a latency once a request is
    /// held up waits for this to grow first, so that the request cannot slip through after.
    pub fn requests_delayed(&self) -> u64 {
        self.shared.requests_delayed.load(Ordering::SeqCst)
    }

    /// While on, every new connection is closed as soon as it is accepted, before anything
    /// is forwarded: a client's connect (its handshake) fails, as against a server that
    /// refuses connections. Connections already open are left as they are.
    pub fn set_refusing(&self, on: bool) {
        self.shared.refusing.store(on, Ordering::SeqCst);
    }

    /// Forwards the next `replies` server→client chunks (on any connection), then closes
    /// the connection the one after comes on, both sides, without forwarding it: a
    /// request the server carried out whose reply never arrives, on a connection that
    /// answered before. A chunk is one reply when the client waits for each reply before
    /// its next request. Once.
    pub fn cut_after_replies(&self, replies: u32) {
        self.shared.cut_after.store(i64::from(replies), Ordering::SeqCst);
    }

    /// Closes every current connection, both sides, now. New connections are still
    /// accepted.
    pub fn cut_all(&self) {
        let conns: Vec<Arc<Conn>> = {
            let mut conns = lock(&self.shared.conns);
            self.shared.cuts.fetch_add(1, Ordering::SeqCst);
            conns.drain().map(|(_, c)| c).collect()
        };
        for conn in conns {
            conn.close();
        }
    }

    /// Proxied connections currently open.
    pub fn connection_count(&self) -> usize {
        lock(&self.shared.conns).len()
    }

    /// Freezes the one proxied connection whose upstream side has the local port `port`
    /// (the port Redis shows as `addr=127.0.0.1:PORT` in `CLIENT LIST`): from now on it
    /// stops forwarding in both directions while both its sockets stay open, its bytes read
    /// and discarded (also those still waiting in a delay queue), as the global black hole
    /// does, but for that connection alone: a half-open connection that neither side sees
    /// fail. There is no thaw. Returns whether such a connection was open.
    pub fn freeze_upstream_port(&self, port: u16) -> bool {
        self.freeze_where(|c| c.server.local_addr().is_ok_and(|a| a.port() == port))
    }

    /// Freezes the one proxied connection whose client side comes from the port `port` (a
    /// replica's end of its link to the master, as `CLIENT LIST TYPE master` shows it on
    /// the replica as `laddr=127.0.0.1:PORT`), as [`freeze_upstream_port`](Proxy::freeze_upstream_port)
    /// does. Returns whether such a connection was open.
    pub fn freeze_downstream_port(&self, port: u16) -> bool {
        self.freeze_where(|c| c.client.peer_addr().is_ok_and(|a| a.port() == port))
    }

    /// Freezes every connection that comes from the address `source`, those open now and
    /// those made from now on: a server whose outgoing connections leave from an address of
    /// its own (`bind-source-addr`, one of loopback's 127.0.0.0/8) has its links through
    /// this proxy go silent while the other clients' do not. There is no thaw.
    pub fn freeze_from_address(&self, source: IpAddr) {
        lock(&self.shared.frozen_sources).push(source);
        let conns = lock(&self.shared.conns);
        for conn in conns.values() {
            if conn.client.peer_addr().is_ok_and(|peer| peer.ip() == source) {
                conn.frozen.store(true, Ordering::SeqCst);
            }
        }
    }

    fn freeze_where(&self, which: impl Fn(&Conn) -> bool) -> bool {
        let conns = lock(&self.shared.conns);
        match conns.values().find(|c| which(c)) {
            Some(conn) => {
                conn.frozen.store(true, Ordering::SeqCst);
                true
            }
            None => false,
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
        // Connection threads register themselves under the `conns` lock only while not
        // stopping, so after this no connection can stay open.
        loop {
            self.cut_all();
            let handle = lock(&self.shared.threads).pop();
            match handle {
                Some(handle) => {
                    let _ = handle.join();
                }
                None => break,
            }
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn spawn_tracked(shared: &Arc<Shared>, name: String, f: impl FnOnce() + Send + 'static) {
    let mut threads = lock(&shared.threads);
    // Forget finished threads so a long-lived proxy does not pile up handles.
    threads.retain(|h| !h.is_finished());
    match thread::Builder::new().name(name).spawn(f) {
        Ok(handle) => threads.push(handle),
        Err(e) => panic!("proxy: cannot spawn thread: {e}"),
    }
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    while !shared.stopping.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((client, _)) if shared.refusing.load(Ordering::SeqCst) => {
                let _ = client.shutdown(Shutdown::Both);
            }
            Ok((client, _)) => {
                let id = shared.next_id.fetch_add(1, Ordering::SeqCst);
                let cuts = shared.cuts.load(Ordering::SeqCst);
                let shared2 = shared.clone();
                spawn_tracked(&shared, format!("proxy-conn-{id}"), move || run_connection(id, cuts, client, shared2));
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => {
                thread::sleep(ACCEPT_POLL);
            }
            Err(_) => thread::sleep(ACCEPT_POLL),
        }
    }
}

/// Connects upstream, registers the connection, then runs the client→server direction
/// on this thread and the server→client direction on a new one. `cuts`: the proxy's cuts
/// when it was accepted; one since (while it connected upstream) cuts it as well.
fn run_connection(id: u64, cuts: u64, client: TcpStream, shared: Arc<Shared>) {
    let _ = client.set_nonblocking(false);
    let _ = client.set_nodelay(true);
    let Ok(server) = TcpStream::connect_timeout(&shared.upstream, UPSTREAM_CONNECT_TIMEOUT) else {
        let _ = client.shutdown(Shutdown::Both);
        return;
    };
    let _ = server.set_nodelay(true);
    let frozen = from_frozen_source(&shared, &client);
    let conn = Arc::new(Conn {
        id,
        client,
        server,
        closed: AtomicBool::new(false),
        frozen: AtomicBool::new(frozen),
        live: AtomicUsize::new(2),
        drop_next_reply: AtomicBool::new(false),
    });
    {
        let mut conns = lock(&shared.conns);
        if shared.stopping.load(Ordering::SeqCst) || shared.cuts.load(Ordering::SeqCst) != cuts {
            drop(conns);
            conn.close();
            return;
        }
        conns.insert(id, conn.clone());
    }
    {
        let conn = conn.clone();
        let shared2 = shared.clone();
        spawn_tracked(&shared, format!("proxy-s2c-{id}"), move || pump(&conn, &shared2, Direction::ServerToClient));
    }
    pump(&conn, &shared, Direction::ClientToServer);
}

/// Whether `client` comes from an address whose connections are frozen.
fn from_frozen_source(shared: &Shared, client: &TcpStream) -> bool {
    let Ok(peer) = client.peer_addr() else { return false };
    lock(&shared.frozen_sources).contains(&peer.ip())
}

impl Conn {
    /// Marks this connection's next reply for discarding when `request` contains the
    /// needle [`Proxy::drop_reply_to`] set; called before the request is forwarded, so the
    /// mark is always there before the reply.
    fn mark_if_reply_to_drop(&self, shared: &Shared, request: &[u8]) {
        let mut needle = lock(&shared.reply_to_drop);
        let matches = needle.as_deref().is_some_and(|n| !n.is_empty() && request.windows(n.len()).any(|w| w == n));
        if matches {
            *needle = None;
            self.drop_next_reply.store(true, Ordering::SeqCst);
        }
    }

    /// Whether bytes travelling in `dir` on this connection are forwarded right now.
    fn forwarding(&self, shared: &Shared, dir: Direction) -> bool {
        !self.frozen.load(Ordering::SeqCst) && shared.forwarding(dir)
    }

    fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        let _ = self.client.shutdown(Shutdown::Both);
        let _ = self.server.shutdown(Shutdown::Both);
    }
}

impl Shared {
    fn latency(&self) -> Duration {
        Duration::from_nanos(self.latency_nanos.load(Ordering::SeqCst))
    }

    /// Counts a reply about to be forwarded: true when it is the one to cut at.
    fn cut_now(&self) -> bool {
        let left = self.cut_after.load(Ordering::SeqCst);
        if left < 0 {
            return false;
        }
        if left == 0 {
            self.cut_after.store(-1, Ordering::SeqCst);
            return true;
        }
        self.cut_after.fetch_sub(1, Ordering::SeqCst);
        false
    }

    /// Whether bytes travelling in `dir` are forwarded right now; a chunk of a reply not
    /// forwarded because replies are dropped is counted.
    fn forwarding(&self, dir: Direction) -> bool {
        if self.blackhole.load(Ordering::SeqCst) {
            return false;
        }
        let discard_reply = dir == Direction::ServerToClient && self.drop_replies.load(Ordering::SeqCst);
        if discard_reply {
            self.replies_dropped.fetch_add(1, Ordering::SeqCst);
        }
        !discard_reply
    }
}

/// Writes one chunk to `dst`; false when the write failed or the chunk is the reply to
/// cut at ([`Proxy::cut_after_replies`]), the connection then closed.
fn deliver(conn: &Conn, shared: &Shared, dir: Direction, dst: &mut &TcpStream, chunk: &[u8]) -> bool {
    if dir == Direction::ServerToClient && shared.cut_now() {
        conn.close();
        return false;
    }
    let written = dst.write_all(chunk).is_ok();
    if written && dir == Direction::ClientToServer {
        shared.requests_forwarded.fetch_add(1, Ordering::SeqCst);
    }
    written
}

/// Copies one direction of `conn` through a FIFO delay queue until EOF or an error,
/// then ends that direction (and the whole connection once both have ended).
fn pump(conn: &Arc<Conn>, shared: &Shared, dir: Direction) {
    let (src, mut dst) = match dir {
        Direction::ClientToServer => (&conn.client, &conn.server),
        Direction::ServerToClient => (&conn.server, &conn.client),
    };
    let delivered = copy_until_eof(conn, shared, dir, src, &mut dst);
    end_direction(conn, shared, dst, delivered);
}

/// Chunks read and waiting for their time to be written: (due, bytes), oldest first.
type DelayQueue = VecDeque<(Instant, Vec<u8>)>;

/// The forwarding loop of one direction: writes what is due, reads what comes (waiting at
/// most until the next chunk is due). True at a clean EOF with everything delivered; false
/// once the connection is closed or a read or write fails.
fn copy_until_eof(conn: &Conn, shared: &Shared, dir: Direction, mut src: &TcpStream, dst: &mut &TcpStream) -> bool {
    let mut queue = DelayQueue::new();
    let mut buf = vec![0u8; BUF_SIZE];
    let mut eof = false;
    loop {
        if conn.closed.load(Ordering::SeqCst) {
            return false;
        }
        if !deliver_due(conn, shared, dir, dst, &mut queue) {
            return false;
        }
        let next_due = queue.front().map(|(due, _)| *due);
        if eof {
            match next_due {
                None => return true,
                Some(due) => {
                    // Drain the rest on time, staying responsive to `close`.
                    let wait = due.saturating_duration_since(Instant::now());
                    thread::sleep(wait.min(Duration::from_millis(10)));
                    continue;
                }
            }
        }
        let timeout = next_due.map(|due| due.saturating_duration_since(Instant::now()).max(Duration::from_millis(1)));
        if src.set_read_timeout(timeout).is_err() {
            return false;
        }
        match src.read(&mut buf) {
            Ok(0) => eof = true,
            Ok(n) => {
                if !pass_on(conn, shared, dir, dst, &mut queue, &buf[..n]) {
                    return false;
                }
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted) => {}
            Err(_) => return false,
        }
    }
}

/// Writes every chunk of `queue` that is due; false when a write failed.
fn deliver_due(conn: &Conn, shared: &Shared, dir: Direction, dst: &mut &TcpStream, queue: &mut DelayQueue) -> bool {
    let now = Instant::now();
    while queue.front().is_some_and(|(due, _)| *due <= now) {
        let (_, chunk) = queue.pop_front().expect("front exists");
        if conn.forwarding(shared, dir) && !deliver(conn, shared, dir, dst, &chunk) {
            return false;
        }
    }
    true
}

/// A chunk just read: discarded while nothing is forwarded, written at once when there is
/// no latency and nothing waits before it, queued for its time otherwise. False when its
/// write failed.
fn pass_on(
    conn: &Conn,
    shared: &Shared,
    dir: Direction,
    dst: &mut &TcpStream,
    queue: &mut DelayQueue,
    chunk: &[u8],
) -> bool {
    match dir {
        Direction::ClientToServer => conn.mark_if_reply_to_drop(shared, chunk),
        Direction::ServerToClient if conn.drop_next_reply.swap(false, Ordering::SeqCst) => {
            shared.replies_dropped.fetch_add(1, Ordering::SeqCst);
            return true; // the reply `Proxy::drop_reply_to` asked to lose
        }
        Direction::ServerToClient => {}
    }
    if !conn.forwarding(shared, dir) {
        return true; // read and discarded
    }
    let latency = shared.latency();
    if latency.is_zero() && queue.is_empty() {
        return deliver(conn, shared, dir, dst, chunk);
    }
    let mut due = Instant::now() + latency;
    if let Some((last, _)) = queue.back() {
        due = due.max(*last); // keep order when latency shrinks
    }
    queue.push_back((due, chunk.to_vec()));
    if dir == Direction::ClientToServer {
        shared.requests_delayed.fetch_add(1, Ordering::SeqCst);
    }
    true
}

/// Ends one direction of `conn`: after a clean EOF with everything `delivered` the
/// half-close is passed on, otherwise the connection is closed; the direction that ends
/// last closes the connection and forgets it.
fn end_direction(conn: &Conn, shared: &Shared, dst: &TcpStream, delivered: bool) {
    if delivered {
        // Clean EOF with everything delivered: pass the half-close on.
        let _ = dst.shutdown(Shutdown::Write);
    } else {
        conn.close();
    }
    if conn.live.fetch_sub(1, Ordering::SeqCst) == 1 {
        lock(&shared.conns).remove(&conn.id);
        conn.close();
    }
}
