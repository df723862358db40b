//! Publish/subscribe fan-out's books, kept apart from the op metrics
//! because a message is counted twice: once by its publisher (the PUBLISH
//! was acknowledged in the window, its reply said how many it reached) and
//! once by every subscriber that received it. Publishers keep a
//! [`PublishLedger`]; subscribers run beside the lanes on the load threads
//! ([`run_subscriber`]), read their sockets (or, when the workload pauses
//! them, do not), subscribe again when the server drops them, and keep
//! which sequence numbers arrived; after the load a bounded drain lets what
//! is in flight arrive; [`summarize`] sets the two against each other, so a
//! drop is exactly a message published on a subscriber's channel in the
//! window that it never received.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use hdrhistogram::Histogram;
use tokio::sync::oneshot;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::metrics::{latency_stats, new_histogram};
use faultline_kind::fanout::{parse_payload, stamp_now, stamp_of};
use faultline_kind::workload::Fanout;
use faultline_kind::{Stream, TargetDriver};
use faultline_model::stats::{FanoutStats, SubscriberStats};

/// The longest the subscribers read on after the last PUBLISH was answered,
/// waiting for what is still in flight.
pub const DRAIN_LIMIT: Duration = Duration::from_secs(1);

/// How long a subscriber waits between attempts to subscribe again, and
/// how long one attempt may take.
const RESUBSCRIBE_PAUSE: Duration = Duration::from_millis(100);
const RESUBSCRIBE_TIMEOUT: Duration = Duration::from_millis(500);

/// A set of sequence numbers.
#[derive(Debug, Default, Clone)]
pub struct Seqs {
    words: Vec<u64>,
    count: u64,
}

impl Seqs {
    /// Adds `seq`; false when it was there already.
    pub fn insert(&mut self, seq: u32) -> bool {
        let (word, bit) = (seq as usize / 64, seq % 64);
        if word >= self.words.len() {
            self.words.resize(word + 1, 0);
        }
        let had = self.words[word] >> bit & 1 == 1;
        self.words[word] |= 1 << bit;
        self.count += u64::from(!had);
        !had
    }

    pub fn len(&self) -> u64 {
        self.count
    }

    /// How many of these `other` has too.
    pub fn common(&self, other: &Seqs) -> u64 {
        self.words.iter().zip(&other.words).map(|(a, b)| u64::from((a & b).count_ones())).sum()
    }
}

/// One publisher lane's acknowledged messages.
#[derive(Debug)]
pub struct PublishLedger {
    pub lane: u16,
    measure_from: Instant,
    /// Per channel: the messages acknowledged that were issued in the window.
    pub in_window: Vec<Seqs>,
    /// Per channel: the last message acknowledged, window or not (what the
    /// drain waits for).
    pub last: Vec<Option<u32>>,
    /// The receivers PUBLISH reported, summed over the window's messages.
    pub receivers: u64,
}

impl PublishLedger {
    pub fn new(lane: u16, channels: usize, measure_from: Instant) -> PublishLedger {
        PublishLedger {
            lane,
            measure_from,
            in_window: vec![Seqs::default(); channels],
            last: vec![None; channels],
            receivers: 0,
        }
    }

    /// PUBLISH of message `seq` on `channel`, issued at `issued`, was
    /// answered: it reached `receivers` subscribers.
    pub fn acknowledged(&mut self, channel: usize, seq: u32, receivers: i64, issued: Instant) {
        let Some(last) = self.last.get_mut(channel) else { return };
        *last = Some(last.map_or(seq, |l| l.max(seq)));
        if issued >= self.measure_from {
            self.in_window[channel].insert(seq);
            self.receivers += receivers.max(0) as u64;
        }
    }
}

/// What one publisher's messages on one channel look like to one subscriber.
#[derive(Debug, Default)]
struct Heard {
    seqs: Seqs,
    /// The highest sequence number received.
    highest: Option<u32>,
}

/// One subscriber's books.
pub struct SubscriberBooks {
    pub index: u32,
    pub channels: Vec<u32>,
    pub paused: bool,
    /// By publisher lane, then by the channel's place in `channels`.
    heard: Vec<Vec<Heard>>,
    pub duplicates: u64,
    pub reordered: u64,
    pub reconnects: u64,
    latency: Histogram<u64>,
    /// It had every publisher's last message when it stopped.
    pub drained: bool,
}

/// When the drain starts: the last message of each (publisher, channel),
/// and the time it gives up.
pub struct Drain {
    pub until: Instant,
    pub last: Arc<HashMap<(u16, u32), u32>>,
}

/// A subscriber, subscribed before the clock started.
pub struct Subscriber {
    pub index: u32,
    pub stream: Stream,
    /// What the server sent after the subscriptions were confirmed.
    pub leftover: Vec<u8>,
}

/// How a subscriber runs.
pub struct SubscriberRun {
    pub driver: Arc<dyn TargetDriver>,
    pub uri: String,
    pub fanout: Arc<Fanout>,
    pub measure_from: Instant,
    pub drain: oneshot::Receiver<Drain>,
    pub cancel: CancellationToken,
}

/// Reads one subscriber's socket until the drain is done (or the run is
/// interrupted); pauses where the workload says; subscribes again when the
/// connection breaks.
pub async fn run_subscriber(sub: Subscriber, run: SubscriberRun) -> SubscriberBooks {
    let SubscriberRun { driver, uri, fanout, measure_from, mut drain, cancel } = run;
    let pubsub = driver.pubsub().expect("validation allows fanout only on kinds with pub/sub");
    let channels = fanout.channels_of(sub.index);
    let names: Vec<Vec<u8>> = channels.iter().map(|c| fanout.channels[*c as usize].clone()).collect();
    let paused = fanout.pauses(sub.index);
    let pause =
        fanout.pause.filter(|_| paused).map(|(_, at, pause_for)| (measure_from + at, measure_from + at + pause_for));
    let mut books = SubscriberBooks {
        index: sub.index,
        channels: channels.clone(),
        paused,
        heard: Vec::new(),
        duplicates: 0,
        reordered: 0,
        reconnects: 0,
        latency: new_histogram(),
        drained: false,
    };
    let window_stamp = stamp_of(measure_from.into_std());
    let mut stream = Some(sub.stream);
    let mut buf = sub.leftover;
    let mut chunk = vec![0u8; 64 * 1024];
    let mut draining: Option<Drain> = None;
    let mut next_dial = Instant::now();
    loop {
        // Take every whole message read so far.
        let mut at = 0;
        loop {
            match pubsub.decode_push(&buf[at..]) {
                Ok(Some(pushed)) => {
                    if let Some((channel, payload)) = &pushed.message {
                        let channel = &buf[at + channel.start..at + channel.end];
                        let payload = &buf[at + payload.start..at + payload.end];
                        if let (Some(c), Some((id, stamp))) =
                            (names.iter().position(|n| n == channel), parse_payload(payload))
                        {
                            books.heard(id.lane, c, id.seq, stamp, window_stamp);
                        }
                    }
                    at += pushed.len;
                }
                Ok(None) => break,
                Err(_) => {
                    // Garbled: nothing more on this stream can be trusted.
                    stream = None;
                    books.reconnects += 1;
                    at = buf.len();
                    break;
                }
            }
        }
        buf.drain(..at);
        let now = Instant::now();
        if let Some(d) = &draining {
            if books.has_all(&d.last) {
                books.drained = true;
                break;
            }
            if now >= d.until {
                break;
            }
        }
        let paused_until = pause.filter(|(from, to)| now >= *from && now < *to).map(|(_, to)| to);
        // Wake for the pause's start or end, a resubscribe, or the drain's end.
        let wake = [
            pause.map(|(from, _)| from).filter(|from| *from > now),
            paused_until,
            (stream.is_none() && paused_until.is_none()).then_some(next_dial),
            draining.as_ref().map(|d| d.until),
        ]
        .into_iter()
        .flatten()
        .min();
        let read = async {
            match (&mut stream, paused_until) {
                (Some(s), None) => s.read(&mut chunk).await,
                _ => std::future::pending().await,
            }
        };
        let sleep = async {
            match wake {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            _ = cancel.cancelled() => break,
            d = &mut drain, if draining.is_none() => match d {
                Ok(d) => draining = Some(d),
                Err(_) => break,
            },
            n = read => match n {
                Ok(n) if n > 0 => buf.extend_from_slice(&chunk[..n]),
                // The server dropped it (a slow subscriber past its output
                // buffer limit, a restart): subscribe again.
                _ => {
                    stream = None;
                    buf.clear();
                    books.reconnects += 1;
                    next_dial = Instant::now();
                }
            },
            _ = sleep => {
                if stream.is_none() && paused_until.is_none() && Instant::now() >= next_dial {
                    match tokio::time::timeout(RESUBSCRIBE_TIMEOUT, pubsub.subscribe(&uri, &names)).await {
                        Ok(Ok((s, leftover))) => {
                            stream = Some(s);
                            buf = leftover;
                        }
                        // Refused or too slow: try again after a pause.
                        Ok(Err(_)) | Err(_) => next_dial = Instant::now() + RESUBSCRIBE_PAUSE,
                    }
                }
            }
        }
    }
    books
}

impl SubscriberBooks {
    /// Message `seq` of publisher `lane` on its `place`-th channel, sent at `stamp`.
    fn heard(&mut self, lane: u16, place: usize, seq: u32, stamp: u64, window_stamp: u64) {
        let lane = lane as usize;
        if lane >= self.heard.len() {
            self.heard.resize_with(lane + 1, Vec::new);
        }
        if self.heard[lane].is_empty() {
            self.heard[lane].resize_with(self.channels.len(), Heard::default);
        }
        let heard = &mut self.heard[lane][place];
        let new = heard.seqs.insert(seq);
        let late = heard.highest.is_some_and(|h| seq < h);
        heard.highest = Some(heard.highest.map_or(seq, |h| h.max(seq)));
        if stamp < window_stamp {
            return;
        }
        match (new, late) {
            (false, _) => self.duplicates += 1,
            (true, true) => self.reordered += 1,
            (true, false) => {}
        }
        if new {
            let us = (stamp_now().saturating_sub(stamp) / 1000).max(1);
            self.latency.saturating_record(us);
        }
    }

    /// What it heard from publisher `lane` on channel `channel`.
    fn of(&self, lane: u16, channel: u32) -> Option<&Heard> {
        let place = self.channels.iter().position(|c| *c == channel)?;
        self.heard.get(lane as usize)?.get(place)
    }

    /// Whether every publisher's last message on its channels has arrived.
    fn has_all(&self, last: &HashMap<(u16, u32), u32>) -> bool {
        last.iter()
            .filter(|((_, c), _)| self.channels.contains(c))
            .all(|((lane, c), seq)| self.of(*lane, *c).and_then(|h| h.highest).is_some_and(|h| h >= *seq))
    }
}

/// A fan-out cell's books, once the lanes and the subscribers are done.
pub struct FanoutBooks {
    pub ledgers: Vec<PublishLedger>,
    pub subscribers: Vec<SubscriberBooks>,
    pub drain: Duration,
}

/// The drain's target: every publisher's last acknowledged message per channel.
pub fn last_messages<'a>(ledgers: impl Iterator<Item = &'a PublishLedger>) -> HashMap<(u16, u32), u32> {
    let mut last = HashMap::new();
    for l in ledgers {
        for (c, seq) in l.last.iter().enumerate() {
            if let Some(seq) = seq {
                last.insert((l.lane, c as u32), *seq);
            }
        }
    }
    last
}

/// The fan-out's numbers: each subscriber's books against the publishers'.
pub fn summarize(
    fanout: &Fanout,
    ledgers: &[PublishLedger],
    subscribers: &[SubscriberBooks],
    window: Duration,
    drain: Duration,
) -> FanoutStats {
    let mut latency = new_histogram();
    let mut per_subscriber = Vec::with_capacity(subscribers.len());
    for s in subscribers {
        let _ = latency.add(&s.latency);
        let (mut published, mut received) = (0, 0);
        for l in ledgers {
            for c in &s.channels {
                let sent = &l.in_window[*c as usize];
                published += sent.len();
                received += s.of(l.lane, *c).map_or(0, |h| sent.common(&h.seqs));
            }
        }
        per_subscriber.push(SubscriberStats {
            subscriber: s.index,
            channels: s.channels.clone(),
            published,
            received,
            drops: published - received,
            duplicates: s.duplicates,
            reordered: s.reordered,
            reconnects: s.reconnects,
            paused: s.paused,
        });
    }
    let published: u64 = ledgers.iter().flat_map(|l| &l.in_window).map(Seqs::len).sum();
    let sum = |f: fn(&SubscriberStats) -> u64| per_subscriber.iter().map(f).sum::<u64>();
    let delivered = sum(|s| s.received);
    FanoutStats {
        channels: fanout.channels.len() as u32,
        subscribers: fanout.subscribers,
        published,
        expected: sum(|s| s.published),
        delivered,
        delivered_per_s: delivered as f64 / window.as_secs_f64().max(1e-9),
        drops: sum(|s| s.drops),
        duplicates: sum(|s| s.duplicates),
        reordered: sum(|s| s.reordered),
        receivers: ledgers.iter().map(|l| l.receivers).sum(),
        reconnects: sum(|s| s.reconnects),
        drain_ms: drain.as_secs_f64() * 1e3,
        drained: subscribers.iter().all(|s| s.drained),
        latency_ms: latency_stats(&latency),
        per_subscriber,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fanout(channels: u32, subscribers: u32) -> Fanout {
        Fanout {
            channels: (0..channels).map(|c| format!("c{c}").into_bytes()).collect(),
            subscribers,
            message_size: 64,
            pause: None,
        }
    }

    fn subscriber(index: u32, channels: Vec<u32>) -> SubscriberBooks {
        SubscriberBooks {
            index,
            channels,
            paused: false,
            heard: Vec::new(),
            duplicates: 0,
            reordered: 0,
            reconnects: 0,
            latency: new_histogram(),
            drained: true,
        }
    }

    #[test]
    fn drops_are_what_was_published_on_a_subscribers_channels_and_not_received() {
        let t = Instant::now();
        let before = t - Duration::from_secs(1);
        // Lane 0 publishes 0..10 on channel 0 and 0..5 on channel 1; its
        // first message on channel 0 went out in the warm-up.
        let mut lane = PublishLedger::new(0, 2, t);
        lane.acknowledged(0, 0, 2, before);
        (1..10).for_each(|s| lane.acknowledged(0, s, 2, t));
        (0..5).for_each(|s| lane.acknowledged(1, s, 1, t));
        let window = 1_000_000;
        // Subscriber 0 (channel 0) hears everything, 3 twice and 7 before 6;
        let mut a = subscriber(0, vec![0]);
        for s in [0, 1, 2, 3, 3, 4, 5, 7, 6, 8, 9] {
            a.heard(0, 0, s, window, window);
        }
        // subscriber 1 (channel 1) misses 2 and 3; subscriber 2 (channel 0)
        // misses 5 and the warm-up's 0, which is not the window's.
        let mut b = subscriber(1, vec![1]);
        [0, 1, 4].into_iter().for_each(|s| b.heard(0, 0, s, window, window));
        let mut c = subscriber(2, vec![0]);
        [1, 2, 3, 4, 6, 7, 8, 9].into_iter().for_each(|s| c.heard(0, 0, s, window, window));
        let stats = summarize(&fanout(2, 3), &[lane], &[a, b, c], Duration::from_secs(2), Duration::ZERO);
        let per: Vec<(u64, u64, u64)> =
            stats.per_subscriber.iter().map(|s| (s.published, s.received, s.drops)).collect();
        assert_eq!(per, [(9, 9, 0), (5, 3, 2), (9, 8, 1)]);
        assert_eq!((stats.published, stats.expected, stats.delivered, stats.drops), (14, 23, 20, 3));
        assert_eq!((stats.duplicates, stats.reordered), (1, 1));
        assert_eq!(stats.receivers, 9 * 2 + 5);
        assert_eq!(stats.delivered_per_s, 10.0);
    }

    #[test]
    fn the_drain_waits_for_each_publishers_last_message_on_the_subscribers_channels() {
        let mut lane = PublishLedger::new(3, 2, Instant::now());
        lane.acknowledged(0, 4, 1, Instant::now());
        lane.acknowledged(1, 9, 1, Instant::now());
        let last = last_messages([&lane].into_iter());
        let mut s = subscriber(0, vec![0]);
        assert!(!s.has_all(&last));
        s.heard(3, 0, 4, 0, 0);
        assert!(s.has_all(&last), "channel 1 is not its channel");
    }

    #[test]
    fn sequence_sets_count_and_intersect() {
        let (mut a, mut b) = (Seqs::default(), Seqs::default());
        assert!(a.insert(1) && !a.insert(1) && a.insert(200));
        [1, 2, 200, 1000].into_iter().for_each(|s| {
            b.insert(s);
        });
        assert_eq!((a.len(), b.len(), a.common(&b), b.common(&a)), (2, 4, 2, 2));
    }
}
