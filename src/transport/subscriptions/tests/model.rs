//! The machine against a model of a server, driven by random operations: its invariants
//! hold after every step, and once everyone leaves nothing is left anywhere.

use super::*;

#[derive(Debug, Clone)]
enum Op {
    Join {
        channel: usize,
        covering: bool,
        weight: u64,
    },
    Leave {
        pick: usize,
        pass_on: bool,
    },
    Read,
    Publish {
        channel: usize,
        beside: bool,
    },
    Disconnect,
    Connect,
    Advance(u64),
    Refuse(usize),
    /// The channel's slot leaves this node (or comes back).
    Migrate(usize),
}

const CHANNELS: [&str; 3] = ["a", "b", "c"];

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..3usize, any::<bool>(), 1..3u64).prop_map(|(channel, covering, weight)| Op::Join { channel, covering, weight }),
        3 => (any::<usize>(), any::<bool>()).prop_map(|(pick, pass_on)| Op::Leave { pick, pass_on }),
        6 => Just(Op::Read),
        2 => (0..3usize, any::<bool>()).prop_map(|(channel, beside)| Op::Publish { channel, beside }),
        1 => Just(Op::Disconnect),
        2 => Just(Op::Connect),
        2 => (0..1500u64).prop_map(Op::Advance),
        1 => (0..3usize).prop_map(Op::Refuse),
        1 => (0..3usize).prop_map(Op::Migrate),
    ]
}

/// The meaning each channel keeps (a channel's name says what it is).
type Meanings = HashMap<&'static str, &'static dyn Meaning>;

fn run(sharded: bool, ops: Vec<Op>) -> std::result::Result<(), TestCaseError> {
    let mut world = World::new(sharded);
    let mut meanings = Meanings::new();
    for op in ops {
        step(&mut world, &mut meanings, sharded, op)?;
        world.check()?;
    }
    all_quiet(&mut world)?;
    everyone_leaves(&mut world)
}

/// One operation on the world.
fn step(world: &mut World, meanings: &mut Meanings, sharded: bool, op: Op) -> std::result::Result<(), TestCaseError> {
    match op {
        Op::Join { channel, covering, weight } => {
            let name = CHANNELS[channel];
            let meaning = *meanings.entry(name).or_insert(if covering { &Covering } else { &One });
            world.join(name, meaning, weight);
        }
        Op::Leave { pick, pass_on } if !world.waiters.is_empty() => {
            let index = pick % world.waiters.len();
            world.leave(index, pass_on);
        }
        Op::Leave { .. } => {}
        Op::Read => read(world, meanings)?,
        Op::Publish { channel, beside } => {
            let name = CHANNELS[channel];
            let target = if beside { format!("own:{name}:7") } else { name.to_owned() };
            world.redis.publish(&target, "0");
        }
        Op::Disconnect => world.disconnect(),
        Op::Connect if !world.subs.connected => world.connect(),
        Op::Connect => {}
        Op::Advance(ms) => world.advance(Duration::from_millis(ms)),
        Op::Migrate(channel) if sharded => {
            let name = CHANNELS[channel];
            if !world.redis.elsewhere.remove(name) {
                let covered = world.subs.channels.get(name).map(|ch| ch.names(name)).unwrap_or_default();
                world.redis.slot_leaves(name, &covered);
            }
        }
        Op::Migrate(_) => {}
        Op::Refuse(channel) => {
            let name = CHANNELS[channel].to_owned();
            if !world.redis.refused.remove(&name) {
                world.redis.refused.insert(name);
            }
        }
    }
    Ok(())
}

/// Reads the next reply: a release on a ready channel wakes a waiter not woken yet, if any.
fn read(world: &mut World, meanings: &Meanings) -> std::result::Result<(), TestCaseError> {
    let release = match world.redis.inbox.front() {
        Some(Reply::Message { channel, payload }) if payload == b"0" => Some(channel.clone()),
        _ => None,
    };
    let unwoken =
        |world: &World, name: &str| world.waiters.iter().filter(|(c, _, s)| c == name && !s.woken.get()).count();
    let before = release.as_deref().map(|name| unwoken(world, name));
    let plain =
        release.as_deref().is_some_and(|name| meanings.get(name).is_some_and(|m| m.beside(name, "7").is_empty()));
    world.read_one();
    if let (Some(name), Some(before), true) = (release.as_deref(), before, plain)
        && before > 0
    {
        prop_assert_eq!(unwoken(world, name), before - 1, "a release on {} woke nobody", name);
    }
    Ok(())
}

/// Quiet: connected, every reply read. Redis holds exactly the ready subscriptions (and
/// what they cover), and every waiter's channel is ready or refused.
fn all_quiet(world: &mut World) -> std::result::Result<(), TestCaseError> {
    if !world.subs.connected {
        world.connect();
    }
    world.read_all();
    world.check()?;
    let mut on = HashSet::new();
    for (name, ch) in &world.subs.channels {
        match &ch.link {
            Link::On => on.extend(ch.names(name)),
            Link::Refused(_) | Link::Moved => prop_assert!(!ch.waiters.is_empty()),
            other => prop_assert!(false, "{} is {:?} when all is quiet", name, other),
        }
    }
    prop_assert_eq!(&on, &world.redis.subscribed);
    Ok(())
}

/// Everyone leaves and the kept subscriptions run out: nothing is left anywhere.
fn everyone_leaves(world: &mut World) -> std::result::Result<(), TestCaseError> {
    while !world.waiters.is_empty() {
        world.leave(0, true);
    }
    world.read_all();
    world.advance(LINGER);
    world.read_all();
    world.check()?;
    prop_assert_eq!(world.subs.channel_count(), 0);
    prop_assert!(world.redis.subscribed.is_empty(), "left subscribed: {:?}", world.redis.subscribed);
    prop_assert!(world.subs.expected.is_empty() && world.subs.covered.is_empty());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn holds_its_invariants_and_leaves_nothing_behind(
        sharded in any::<bool>(),
        ops in prop::collection::vec(op(), 1..120),
    ) {
        run(sharded, ops)?;
    }
}
