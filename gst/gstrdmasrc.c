/* SPDX-License-Identifier: LGPL-2.1-or-later */
/**
 * SECTION:element-rdmasrc
 * @title: rdmasrc
 * @see_also: rdmasink
 *
 * rdmasrc listens on a port for rdmasinks (any number of sender processes,
 * each one connection with any number of devices) and has one pad per
 * device, `src_<device>` (src_0 ... src_255).  A pad named on a launch line
 * (`r.src_3`) or requested by name is there at once, before its camera
 * comes, so the link is made at once and EOS sent to the element reaches
 * it even if the camera never comes (`gst-launch-1.0 -e` ends on Ctrl-C).
 * A request without a name (NULL or `src_%u`, as tee and compositor take)
 * gets the lowest device without a pad; a released pad's name can be
 * requested again.  A device nobody asked for gets a sometimes pad when
 * its caps arrive, before its first buffer, and an unnamed link
 * (`rdmasrc ! sink`) takes the first camera that comes, whatever its
 * device.  Devices may appear at any time, so there is no no-more-pads
 * (except with device-id, below).  A pad pushes stream-start, caps, a
 * TIME segment, then buffers; it gets EOS when its sink sent EOS, and a
 * new stream (stream-start, caps) on the same pad when the device starts
 * again.  Pads stay until released: across READY and NULL, links made to
 * them keep working.  As with any live source, a sink that may
 * never get data (a camera that may not come) needs async=false, or the
 * pipeline waits for it to preroll before any sink plays.
 *
 * One pipeline per camera: every rdmasrc of a process with the same
 * transport, address and port shares one receiver (one listener, one lane
 * and one QP per sender, one receive thread), as rdmasinks share a
 * connection.  #GstRdmaSrc:device-id=N makes an rdmasrc of the one camera
 * N, its pad src_N there from the start (`rdmasrc device-id=3 ! sink`
 * links at once, OpenCV's one VideoCapture per camera), and it signals
 * no-more-pads.  That pad is the element's own, made from the sometimes
 * template when the property is set, not a request pad an application
 * could release; changing device-id (in NULL or READY) moves it.  -1,
 * the default, takes every device no other rdmasrc on the port asked for.
 * Frames of a device nobody asked for are dropped and counted
 * (unclaimed-drops).  The caps a device sent before its rdmasrc joined are
 * kept and start its stream.  Starting, stopping or failing one rdmasrc
 * never costs another a frame, and the last one out closes the listener.
 * What makes the receiver (mechanism, blocks, block-size, max-senders,
 * allowed-senders, max-connects-per-second, max-frame-size, poll-mode,
 * max-held) must agree: an rdmasrc that differs, asks for a device
 * another has, or also takes every device (no device-id, no pad named)
 * fails its change to PAUSED with an error naming both.  Without
 * device-id, an rdmasrc that names its cameras by request pads
 * (`rdmasrc name=r r.src_0` in one pipeline, `rdmasrc name=s s.src_1` in
 * another) and starts beside one that takes every device takes just the
 * devices of its pads, also of those requested later; the first of them
 * to start still takes the devices nobody asked for.
 *
 * It takes rdma:// URIs (#GstURIHandler), so playbin, uridecodebin,
 * gst-play-1.0 and GstPlay open a camera: `rdma://HOST:PORT/DEVICE` sets
 * address, port and device-id (no DEVICE: every device), and every query
 * key a property, its value as on a launch line
 * (`gst-play-1.0 "rdma://0.0.0.0:7471/3?transport=shm"`).  With a DEVICE it
 * is the one-camera rdmasrc above.  The #GstRdmaSrc:uri property takes the
 * same on a launch line (`rdmasrc uri="rdma://0.0.0.0:7471/3?transport=shm"
 * ! ...`); one that can't be set changes nothing and fails the change to
 * PAUSED, saying why.
 *
 * Every camera is its own stream.  The receive thread takes the frames of
 * every device from the receiver (sbr_receiver_next_frame, in per-device
 * packet order), accepts and notices senders (from PAUSED on), and queues
 * each frame on its device's pad; it never pushes downstream.  Each pad
 * has a streaming thread of its own (a pad task) that pushes its queue, so
 * sinks linked straight to the pads preroll and play, and a slow or stuck
 * consumer of one camera holds up that camera alone: no queue is needed
 * after the pads.  Flow returns are combined with a #GstFlowCombiner: a
 * device nobody linked (NOT_LINKED) doesn't stop the others.
 *
 * It is a live source: frames are queued and pushed only while PLAYING
 * (what arrives while PAUSED is dropped and counted, and PLAYING->PAUSED
 * empties the queues).  It answers the LATENCY query with live=TRUE and
 * what the transport really adds: unless #GstRdmaSrc:latency says
 * otherwise, the minimum is measured per device as twice the worst
 * lateness of a frame at arrival (our running time then minus its PTS:
 * the transport's jitter, as the first frame is stamped with its arrival)
 * plus 2 ms, rounded up to 1 ms, and a latency message asks the pipeline
 * again when frames come later than that.  A frame more than 250 ms late
 * is an outage, not jitter (a sender that stalled for seconds sends its
 * backlog at once): it raises nothing (sinks with a max-lateness drop
 * it as late, others render it late); raising every camera's latency to
 * seconds would make the pipeline wait that long for good, or fail to
 * configure it.  The backlog's tail, under 250 ms late, still counts: it
 * can raise that camera's minimum past what the other cameras' queues
 * hold, and GStreamer then warns that it can't configure the latency.  The
 * maximum adds what the pad's queue holds (its share of frames, or max-queued
 * under copy and pause) at the stream's frame rate.  So sync=true sinks and
 * compositors neither drop late frames nor wait a whole frame for nothing.
 *
 * Zero copy: a buffer wraps the receive blocks its frame landed in, one
 * memory per block (a fragmented frame is one buffer of several memories).
 * The blocks are marked held while queued or downstream, so the sender
 * skips them, and are handed back when the buffer is freed.
 *
 * A device belongs to one sender: the first connection to send it owns it
 * until that connection closes; another sender's frames of the same device
 * are dropped (counted as "refused" in the stats, one warning naming both
 * senders), and take the device over, with a new stream on the same pad,
 * once the owner is gone.  When an owner goes away without EOS (it left,
 * died, or its connection failed) the element message
 * "rdmasrc-device-lost" (device-id, peer, lane) is posted, and with
 * #GstRdmaSrc:device-lost-eos the device's stream ends with EOS; when the
 * device comes back it starts a new stream on the same pad (its branch is
 * flushed first, as sinks ignore everything after EOS but a flush).
 * #GstRdmaSrc:timeout also applies per device ("rdmasrc-device-timeout").
 * A sender that dies without a word (power loss, a cut cable) sends no
 * disconnect, so over verbs a lane nothing arrived in for
 * #GstRdmaSrc:probe-after milliseconds gets a zero-length RDMA WRITE its NIC
 * must answer (over iWARP a small RDMA READ, given at least 2 s):
 * unanswered, the lane closes about a second later (iWARP: two) and
 * "rdmasrc-device-lost" is posted for its devices; a new sender from the
 * same address takes the devices of a lane whose probe goes unanswered at
 * once.
 *
 * A sender this receiver can't take (another #GstRdmaSrc:mechanism or
 * protocol version, every one of #GstRdmaSrc:max-senders lanes in use, an
 * address not on #GstRdmaSrc:allowed-senders, more connection attempts
 * this second than #GstRdmaSrc:max-connects-per-second) is
 * refused and told why: its rdmasink fails at once naming the mismatch,
 * or, when the refusal can pass (lanes full, too many attempts this
 * second), keeps trying until its connect-timeout and then says why; here
 * a warning names the sender and the reason ("Refused the sender at
 * 10.0.0.2:41234: the receiver runs the status-byte mechanism, the sender
 * sliding-window.", details peer, reason, repeats), at most one per sender
 * host and reason every 10 s, and the stats count refused-connections.
 *
 * Senders coming and going are element messages, on every rdmasrc sharing
 * the receiver (a sender's lane may carry any of their cameras; each
 * pipeline has its own bus): "rdmasrc-sender-connected" (peer, lane) when
 * a sender's connection is accepted, "rdmasrc-sender-left" (peer, lane)
 * when it closes (the sender stopped, died, or its connection failed),
 * and "rdmasrc-sender-refused" (peer, reason, description, repeats) with
 * each refusal warning above, so as often as it (repeats counts the
 * refusals of that host and reason not posted since; refused-connections
 * counts them all).  A refused sender never had a lane.  peer is
 * "ip:port" (verbs) or "shm:pid=N" (shm); lane is the lane of
 * "rdmasrc-device-lost" and of the stats.  Messages rather than signals:
 * they come from the receive thread, which must not wait for an
 * application's handler (the cameras' frames go through it), and reach
 * applications that have only a bus (gst-launch-1.0 -m, OpenCV, playbin).
 *
 * A camera whose frames are larger than #GstRdmaSrc:max-frame-size has
 * every block rejected (counted in its rejected): that bounds what one
 * camera of one sender can make the receiver allocate.  Each lane's keys
 * are type-2 memory windows bound to its sender's QP where the NIC has
 * them (stats: lanes-windowed), and the NIC's own count of refused
 * remote accesses shows as nic-remote-access-errors where it keeps one
 * (docs/protocol.md, "Threat model").
 *
 * A device's share of its lane: every device may have at most
 * #GstRdmaSrc:device-blocks receive blocks out (queued here or held
 * downstream) and that many frames queued; by default three quarters of
 * its sender's lane (each sender connection has #GstRdmaSrc:blocks of its
 * own) shared by the devices with pads on that lane, those of every
 * rdmasrc sharing the receiver (2 blocks each for twelve cameras of one
 * sender on the default 32-block lane, whatever other senders send).  A
 * device no lane owns yet, or whose sender left, is counted on none and
 * has the least it could get, three quarters of a lane over every device
 * with a share; a sender that reconnects has a new lane, which its
 * devices share from their first frame on it.  When a frame would take a
 * device over its share, its pad's "over-budget" property decides (the
 * element's #GstRdmaSrc:over-budget is the default for new pads; on a
 * launch line, `rdmasrc src_3::over-budget=copy` sets one pad):
 * drop-oldest (default, live video) drops the device's oldest queued
 * frames, counted, and marks the next buffer DISCONT (a stream whose
 * sender says its source isn't live defaults to pause instead, copy with
 * the sliding window, and then holds frames over its share in the lane
 * rather than drop or copy them: backpressure); copy keeps them and
 * copies the new frame out of the lane, queueing up to
 * #GstRdmaSrc:max-queued frames; pause does as copy and also sets the
 * device's pause flag, which its sender reads with its status READ and
 * obeys (its backpressure setting: wait or drop), until the share is half
 * free again.  Either way, what downstream holds beyond the share makes
 * new frames copies, never a stall of the lane, and #GstRdmaSrc:max-held
 * caps the blocks the devices of one lane (one sender) together keep: per
 * lane, so one sender's held frames never make another's copies.
 *
 * Timestamps: each frame carries the sender's running time (PTS, DTS) and
 * its capture time, the sender's wall clock (an upstream "timestamp/x-unix"
 * #GstReferenceTimestampMeta's, else when rdmasink got the frame).
 * #GstRdmaSrc:timestamp-mode says how they become this pipeline's running
 * time, per device (several sender pipelines, each with its own clock and
 * base time, may share one connection); a pad's own timestamp-mode
 * overrides it for its device (`rdmasrc src_3::timestamp-mode=sender`):
 *
 * - skew (the default) follows each sender's clock: an estimator per
 *   device fits the rate and offset of the sender's clock against ours
 *   through the lower envelope of arrival minus sender time (the minimum of
 *   each second of sender time, the frames that met no delay, and a line
 *   through the last 32 of them), and maps the sender's times through it.
 *   So PTS minus running time at arrival stays within the transport's
 *   jitter for as long as the stream runs, whatever the two clocks' rates
 *   (with the sender's plain distances a clock 20 ppm fast gains 72 ms an
 *   hour).  Jitter, bursts and late frames never move the envelope;
 *   corrections are spread over at most 0.5 % of the time elapsed
 *   (200 us a frame at 25 fps), so the frame pace stays steady, and a
 *   move of over 50 ms steps.  A frame more than 500 ms off the mapping
 *   (an absurd time, a frame held up that long, or the sender's pipeline
 *   paused or restarted) is stamped with its arrival; once such frames
 *   have agreed for 200 ms of sender time they are a new base (the
 *   mapping starts again from them, the rate kept), else they are counted
 *   as outliers.  The first frame is stamped with its arrival.
 * - capture stamps each frame with its capture instant on our timeline:
 *   our running time at arrival minus the frame's age by the wall clocks
 *   (our wall clock then minus its capture time).  Cameras on hosts whose
 *   wall clocks NTP or PTP keep together align to within that sync,
 *   whatever their senders' running times, clocks or network latencies.
 *   The capture time is the camera's instant (rdmasink: an upstream
 *   reference timestamp, else its render time less the frame's age on the
 *   sender's clock), so a camera behind an encoder is not late.  A
 *   capture time more
 * than 10 s old or 1 s ahead of our wall clock is no live frame's: the frame is
 * stamped with its arrival and counted (capture-invalid).
 * - sender passes the sender's running time as it is, for pipelines that
 *   share a clock and a base time (a #GstNetClientClock of the sender
 *   host's #GstNetTimeProvider, or #GstPtpClock, and the same base time
 *   set on both with gst_element_set_base_time and
 *   gst_element_set_start_time (pipeline, GST_CLOCK_TIME_NONE)).
 * - arrival stamps each frame with our running time at its arrival.
 *
 * In every mode PTS and DTS go through one mapping (PTS keeps its
 * distance from DTS), a device's timestamps never go back (in capture and
 * arrival mode a time behind the last holds at it; sender mode passes the
 * sender's as they are), and the buffer is DISCONT where the mapping
 * starts or jumps forward: the first frame, and the first after the
 * sender reconnected, after a discontinuity that goes back in time (a
 * restarted sender pipeline), after this pipeline went from PAUSED to
 * PLAYING (its running time skipped the pause), and, in skew mode, a new
 * base.  So sync=true sinks render on time after any pause of either
 * side.  Duration and the DISCONT/DELTA_UNIT flags are kept, and the
 * capture time comes as a "timestamp/x-unix" #GstReferenceTimestampMeta.
 * The estimator runs in every mode, so the stats say how each sender's
 * clock runs (rate-ppm) whatever the mode.
 *
 * Offsets: GST_BUFFER_OFFSET is the sender's per-device packet number of
 * the frame's first block (0-65535, wrapping), so a receiver can name or
 * order each device's frames by the sender's numbering and see which ones
 * it missed; GST_BUFFER_OFFSET_END is GST_BUFFER_OFFSET_NONE.  Packet
 * numbers count blocks, not frames: a frame of n blocks takes n numbers,
 * and the in-band caps take one too.
 *
 * Gaps and key frames: the first buffer after any gap is DISCONT, whatever
 * made it: frames the sender dropped (it marks its next frame DISCONT,
 * rdmasink's gap-drops), frames lost on the way (the packet number
 * jumped), frames the pad dropped (drop-oldest, not playing), a new lane
 * (a reconnect, a takeover), a late join.  On a stream whose frames carry
 * DELTA_UNIT, or whose caps are neither video/x-raw nor audio/x-raw (an
 * encoded stream), a delta frame after a gap refers to frames that are
 * gone: such a pad then pushes no delta frame until the next key frame
 * (counted in waiting-for-key-drops), which comes DISCONT, so a decoder
 * downstream never gets a frame without its references.  Drop-oldest on
 * such a stream drops the queued deltas after the frame it drops up to
 * the next queued key frame (the fewest frames that keeps every queued
 * one decodable), or all of them and waits for the next key frame when
 * none is queued.  A DISCONT without a loss (the sender's pipeline
 * paused, see Timestamps) waits for a key frame too.  Raw video and audio
 * keep every frame.  #GstRdmaSrc:wait-for-keyframe=false, or a pad's own
 * wait-for-keyframe, pushes every frame anyway.  A pad that waits asks
 * the sender for a key frame (#GstRdmaSrc:request-keyframe, below), so
 * the wait lasts a key-unit round trip rather than the rest of the GOP;
 * a sender without the feature leaves it to the encoder's next key frame
 * (give encoders a bounded key-frame interval: x264enc key-int-max,
 * vp8enc keyframe-max-dist).
 *
 * More on the properties.  #GstRdmaSrc:allowed-senders takes IPv4/IPv6
 * addresses and networks, or "local" for this host (shm senders,
 * loopback; a shm sender also matches an entry holding 127.0.0.1 or ::1);
 * others are refused before a lane is made (their rdmasink fails, not
 * authorized) and counted in refused-not-allowed, and a bad list fails
 * the change to PAUSED.  #GstRdmaSrc:max-connects-per-second is a bucket
 * holding one second's worth of attempts: attempts beyond it are refused
 * as busy before anything is allocated (refused-busy); attempts refused by
 * allowed-senders don't count.  #GstRdmaSrc:max-frame-size: raise it for
 * 8K RGB and the like.  #GstRdmaSrc:max-held at 0 always copies, as
 * mechanism=sliding-window always does (its in-order ACKs would stall
 * every stream behind one kept buffer).  #GstRdmaSrc:max-queued bounds
 * the memory of copies under copy and pause; drop-oldest queues at most
 * device-blocks frames.  Setting #GstRdmaSrc:latency while PAUSED or
 * PLAYING posts a latency message, so the pipeline configures the new
 * value.  #GstRdmaSrc:poll-mode adaptive learns each device's frame
 * period (and takes it from the caps' framerate), sleeps until just
 * before the next frame and polls through a short window, backing off
 * for streams that aren't periodic; busy spins (the lowest latency, a
 * whole core); backoff spins 20 us, then sleeps doubling up to 1 ms.
 *
 * ## Key units
 *
 * An upstream force-key-unit event (GstForceKeyUnit: a decoder with
 * automatic-request-sync-points after a loss, splitmuxsink
 * send-keyframe-requests, an application) that reaches a device's pad is
 * passed on to that device's sender, one-sidedly: rdmasrc bumps the
 * device's request counter in the lane's status region, the sender sees
 * it with its next status READ and its rdmasink pushes the event upstream
 * into the encoder.  With #GstRdmaSrc:request-keyframe (default on)
 * rdmasrc asks by itself too, when a delta frame of an encoded stream
 * comes right after a gap or as a new stream's first (joining mid-GOP),
 * and while a pad waits for a key frame (#GstRdmaSrc:wait-for-keyframe).
 * One request is outstanding per device at a time, until a key frame of
 * the device comes or a second passes; the stats count them.  The
 * request's running time is not honoured (the sender's pipeline has
 * another clock): its next frame becomes the key frame.  Senders older
 * than the feature, and the sliding-window mechanism, don't hear it.
 *
 * ## Statistics
 *
 * The #GstRdmaSrc:stats property holds the element-wide counters, then
 * one field per device with a pad, "device-<N>" (e.g. device-3), whose
 * value is a structure "rdmasrc-device-stats" (in C:
 * `gst_structure_get (s, "device-3", GST_TYPE_STRUCTURE, &d, NULL)`, in
 * Python `s.get_value ("device-3")`).  Every #GstRdmaSrc:stats-interval
 * milliseconds (0, the default, posts none) the element-wide counters go
 * out as the element message "rdmasrc-stats" and each device's structure
 * as a message "rdmasrc-device-stats" of its own, once (gst-launch -m
 * prints nested structures escaped, messages plainly).
 *
 * Element-wide: refused-connections (senders refused: another mechanism or
 * version, lanes full, ...) and the same by reason, refused-not-allowed
 * (not on allowed-senders), refused-busy (over max-connects-per-second),
 * refused-lanes-full, refused-mechanism, refused-version,
 * refused-geometry, refused-malformed-request, refused-receiver-resources,
 * refused-receiver-memlock (its memlock limit is below a lane),
 * refused-device (sliding-window asked of an iWARP device);
 * lanes-opened, lanes-closed, lanes-active (sender connections),
 * async-errors (lanes closed because their RDMA device reported their QP
 * or CQ in error, or itself failed: docs/hardware.md, "Async events"),
 * lanes-windowed (lanes whose keys are type-2 memory windows bound to the
 * lane's QP, not memory regions), nic-remote-access-errors (the RDMA
 * port's own count of WRITEs and READs refused for a bad key, address or
 * right, all processes; absent where the NIC has no such counter, e.g.
 * Soft-RoCE, or over shm), blocks, bytes, rejected (blocks that failed
 * validation), blocks-held (by buffers now), frames-copied (reassembled by
 * copy), recv-wr-posted (sliding-window only), copies (frames copied: over
 * a share or max-held), held (lane blocks out), no-caps-drops (frames of a
 * device without a stream), pushed, device-blocks (the smallest share of
 * a device now; each device's is in its own structure), unclaimed-drops (frames
 * of devices no rdmasrc sharing the receiver asked for), receiver-members
 * (rdmasrcs of the process sharing it), events-received (the senders'
 * stream events and frame extras taken: tags, stream-starts, segments,
 * gaps), events-dropped (EVENT blocks not understood), extras-dropped
 * (a frame's flags and metas whose frame was lost), metas-not-restored
 * (metas that came but couldn't be put back: a custom meta this process
 * hasn't registered),
 * poll-sleeps (the receive thread's timed sleeps, each a wake-up;
 * poll-sleeps-woken of them ended by a sender's status write on this host,
 * poll-sleeps-timed-out ran to their end), frames-predicted and frames-missed
 * (poll-mode adaptive: frames found polling in their predicted window, or
 * outside it, perhaps waiting for a sleep to end).
 *
 * Per device: device-id, frames, blocks, bytes, drops and gaps (lost on
 * the way), rejected, refused (another sender's frames of it), losses
 * (owners gone without EOS), owner (the owning sender, "" for none),
 * sender-latency (ns: the latency upstream of its rdmasink, from the
 * caps; G_MAXUINT64 unknown),
 * queued (frames waiting for the pad), lane-blocks (blocks out: queued or
 * downstream), held-downstream, pushed, task-wakeups (queued items that
 * had to wake the pad's sleeping task), copies (over its share),
 * layout-copies (frames whose sender padded their planes, GstVideoMeta
 * strides, copied into the caps' layout because downstream doesn't take
 * the meta), frames-fragmented (frames pushed in several memories, which a map
 * of the buffer merges into a copy: from a sender that could not lay the frame
 * over one run of the lane's blocks, an older one or a lane without a long
 * enough run free; 0 when every frame was one memory), drops-leaky (queued
 * frames dropped for room: drop-oldest), drops-not-playing, drops-ended (after
 * EOS), drops-no-layout (padded planes whose layout was lost on the way: extras
 * over max-meta-size, a layout that didn't fit the caps), waiting-for-key-drops
 * (delta frames dropped after a gap, until a key frame), waiting-for-key (the
 * pad waits for one now), paused (its sender told to stop), pauses, paused-time
 * (ns), eos, over-budget (the pad's policy), device-blocks (its share of its
 * lane now); key units asked of its sender: key-units-requested,
 * key-units-upstream (for upstream force-key-unit events), key-units-after-gaps
 * (its own), key-units-merged (asked while one was outstanding),
 * key-units-answered (key frames that came while one was), key-unit-round-trip
 * (ns from the newest request to its key frame); how its buffers are stamped:
 * timestamp-mode, rate-ppm (the estimated rate of its sender's clock
 * against ours, +10000 for 1 % fast), rate-known (fitted through two
 * windows or more), clock-offset (ns, our running time minus the sender's
 * time through the estimate), and the estimator's counters: skew-observed
 * (frames), skew-outliers (frames off the mapping that were no new base),
 * skew-invalid (no time), skew-rebases (new bases: the sender paused,
 * restarted or jumped), skew-rate-clamps (fits beyond 5 %),
 * skew-level-shifts (the envelope moved by less than a jump), skew-steps
 * (corrections too large to spread out), skew-resets (the mapping started
 * again: a new sender, our own pause), capture-invalid (capture mode:
 * capture times no live frame has).
 *
 * ## Example launch lines
 * |[
 * gst-launch-1.0 rdmasrc name=r r.src_3 ! videoconvert ! autovideosink
 * ]| Shows device 3 of whatever rdmasinks connect to port 7471 over verbs.
 * |[
 * gst-launch-1.0 rdmasrc device-id=3 ! videoconvert ! autovideosink
 * ]| The same as one camera's pipeline: other pipelines of the process
 * with rdmasrc device-id=N on port 7471 share its receiver.
 * |[
 * gst-launch-1.0 rdmasrc transport=shm name=r r.src_0 ! fakesink
 * r.src_1 ! fakesink r.src_2 ! fakesink
 * ]| Three cameras, sinks straight on the pads.
 * |[
 * gst-launch-1.0 rdmasrc transport=shm name=r src_0::over-budget=pause
 * r.src_0 ! videoconvert ! comp.sink_0 r.src_1 ! videoconvert ! comp.sink_1
 * compositor name=comp sink_1::xpos=320 ! videoconvert ! autovideosink
 * ]| Two cameras side by side; camera 0's sender is paused rather than its
 * frames dropped when the compositor falls behind.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstrdmasrcpriv.h"

#include <errno.h>
#include <string.h>

#include <gst/base/gstflowcombiner.h>
#include <sbr.h>

#include "gstrdmacommon.h"
#include "gstrdmaelements.h"
#include "gstrdmaenums.h"
#include "gstrdmaproperties.h"
#include "gstrdmasrcdevice.h"
#include "gstrdmasrcframe.h"
#include "gstrdmasrcpad.h"
#include "gstrdmasrcstats.h"
#include "gstrdmauri.h"

enum {
  PROP_0,
  PROP_ADDRESS,
  PROP_PORT,
  PROP_TRANSPORT,
  PROP_MECHANISM,
  PROP_BLOCKS,
  PROP_BLOCK_SIZE,
  PROP_MAX_HELD,
  PROP_DEVICE_BLOCKS,
  PROP_OVER_BUDGET,
  PROP_MAX_QUEUED,
  PROP_WAIT_FOR_KEYFRAME,
  PROP_MAX_SENDERS,
  PROP_ALLOWED_SENDERS,
  PROP_MAX_CONNECTS_PER_SECOND,
  PROP_MAX_FRAME_SIZE,
  PROP_PROBE_AFTER,
  PROP_TOS,
  PROP_ACK_TIMEOUT,
  PROP_COMP_VECTOR,
  PROP_NUMA_NODE,
  PROP_HUGE_PAGES,
  PROP_LATENCY,
  PROP_TIMEOUT,
  PROP_DEVICE_LOST_EOS,
  PROP_REQUEST_KEYFRAME,
  PROP_STATS,
  PROP_STATS_INTERVAL,
  PROP_POLL_MODE,
  PROP_DEVICE_ID,
  PROP_URI,
  PROP_TIMESTAMP_MODE,
  PROP_MAX_META_SIZE,
  N_PROPERTIES
};

#define DEFAULT_ADDRESS "0.0.0.0"
/* Twelve cameras of a sender with two blocks each (one a sink keeps as its
 * last sample, one on its way) and a quarter of the lane left for the
 * sender: the automatic device-blocks shares three quarters of each lane
 * among the devices with pads on it. */
#define DEFAULT_BLOCKS 32
#define DEFAULT_BLOCK_SIZE (1u << 20)
#define DEFAULT_MAX_HELD 65536
#define DEFAULT_DEVICE_BLOCKS 0
#define DEFAULT_OVER_BUDGET GST_RDMA_OVER_BUDGET_DROP_OLDEST
#define DEFAULT_MAX_QUEUED 30
#define DEFAULT_MAX_SENDERS 8
#define DEFAULT_ALLOWED_SENDERS NULL
#define DEFAULT_MAX_CONNECTS_PER_SECOND 50
/* libsbr's default: every 4K format up to 8 bytes a pixel. */
#define DEFAULT_MAX_FRAME_SIZE (64u << 20)
/* libsbr's default: a second of silence, then a probe. */
#define DEFAULT_PROBE_AFTER 1000
/* libsbr's: the lane memory on the RDMA device's node, in huge pages. */
#define DEFAULT_NUMA_NODE (-1)
#define DEFAULT_HUGE_PAGES TRUE
#define DEFAULT_LATENCY (-1)
#define DEFAULT_TIMEOUT 0
#define DEFAULT_DEVICE_LOST_EOS FALSE
#define DEFAULT_REQUEST_KEYFRAME TRUE
#define DEFAULT_POLL_MODE GST_RDMA_POLL_MODE_ADAPTIVE
#define DEFAULT_DEVICE_ID (-1)
#define DEFAULT_TIMESTAMP_MODE GST_RDMA_TIMESTAMP_MODE_SKEW

GST_DEBUG_CATEGORY(gst_rdma_src_debug);
#define GST_CAT_DEFAULT gst_rdma_src_debug

/* Two templates for the same pads, src_<device>.  Requested by name
 * (`r.src_3` on a launch line, gst_element_request_pad_simple) a device's
 * pad exists before its camera comes, so links are made at once and EOS
 * reaches them even if the camera never comes.  A device nobody asked for
 * gets a sometimes pad when its caps arrive, and device-id's one pad is
 * a sometimes pad made at once; the sometimes template is also what makes
 * an unnamed link (`rdmasrc ! sink`) wait for the first camera, as with a
 * demuxer.  Its name differs only because a class can't
 * have two templates of one name. */
static GstStaticPadTemplate src_template = GST_STATIC_PAD_TEMPLATE(
    "src_%u", GST_PAD_SRC, GST_PAD_REQUEST, GST_STATIC_CAPS_ANY);
static GstStaticPadTemplate src_sometimes_template = GST_STATIC_PAD_TEMPLATE(
    "src_%s", GST_PAD_SRC, GST_PAD_SOMETIMES, GST_STATIC_CAPS_ANY);

#define gst_rdma_src_parent_class parent_class

G_DEFINE_TYPE_WITH_CODE(
    GstRdmaSrc, gst_rdma_src, GST_TYPE_ELEMENT,
    G_IMPLEMENT_INTERFACE(GST_TYPE_CHILD_PROXY, gst_rdma_src_child_proxy_init)
        G_IMPLEMENT_INTERFACE(GST_TYPE_URI_HANDLER,
                              gst_rdma_src_uri_handler_init));
GST_ELEMENT_REGISTER_DEFINE_WITH_CODE(rdmasrc, "rdmasrc", GST_RANK_NONE,
                                      GST_TYPE_RDMA_SRC,
                                      gst_rdma_element_init(plugin));

static GParamSpec *properties[N_PROPERTIES];

static void gst_rdma_src_finalize(GObject *object);
static void gst_rdma_src_set_property(GObject *object, guint prop_id,
                                      const GValue *value, GParamSpec *pspec);
static void gst_rdma_src_get_property(GObject *object, guint prop_id,
                                      GValue *value, GParamSpec *pspec);
static GstStateChangeReturn
gst_rdma_src_change_state(GstElement *element, GstStateChange transition);
static gboolean gst_rdma_src_query(GstElement *element, GstQuery *query);
static gboolean gst_rdma_src_send_event(GstElement *element, GstEvent *event);
static GstStructure *gst_rdma_src_get_stats(GstElement *element);
static const GstRdmaReceiverMemberFuncs member_funcs;

/* What makes the receiver, which every rdmasrc sharing it must agree on
 * (gstrdmareceiver.h): where it listens, its lanes and the fabric. */
static void gst_rdma_src_install_receiver_properties(void)
{
  properties[PROP_ADDRESS] = g_param_spec_string(
      "address", "Address",
      "Local address to listen on; the shm transport ignores it",
      DEFAULT_ADDRESS,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY);
  properties[PROP_PORT] = gst_rdma_param_spec_port("Port to listen on");
  properties[PROP_TRANSPORT] = gst_rdma_param_spec_transport();
  properties[PROP_MECHANISM] = gst_rdma_param_spec_mechanism();
  properties[PROP_BLOCKS] = g_param_spec_uint(
      "blocks", "Blocks", "Receive blocks per sender connection (lane)", 2,
      65536, DEFAULT_BLOCKS,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY);
  properties[PROP_BLOCK_SIZE] = g_param_spec_uint(
      "block-size", "Block size",
      "Bytes per receive block, 72 of them header and trailer; a larger "
      "frame comes as one buffer of several memories",
      128, 64u << 20, DEFAULT_BLOCK_SIZE,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY);
  properties[PROP_MAX_HELD] = g_param_spec_uint(
      "max-held", "Max held",
      "Most receive blocks of each lane (one per sender) its devices may "
      "have out, queued or downstream, before its frames are copied (at "
      "most blocks-1 takes effect; 0 = always copy)",
      0, 65536, DEFAULT_MAX_HELD,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY);
  properties[PROP_MAX_SENDERS] = g_param_spec_uint(
      "max-senders", "Max senders",
      "Sender connections (lanes) accepted at once: one per sending "
      "process",
      1, 1024, DEFAULT_MAX_SENDERS,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY);
  properties[PROP_ALLOWED_SENDERS] = g_param_spec_string(
      "allowed-senders", "Allowed senders",
      "Who may connect: comma-separated addresses and networks "
      "(\"10.0.0.0/8,192.168.1.5,fe80::/10\") or \"local\" (empty = "
      "anyone)",
      DEFAULT_ALLOWED_SENDERS,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY);
  properties[PROP_MAX_CONNECTS_PER_SECOND] = g_param_spec_uint(
      "max-connects-per-second", "Max connects per second",
      "Connection attempts considered per second, more are refused as busy "
      "and retried by their rdmasink (0 = no bound)",
      0, G_MAXUINT, DEFAULT_MAX_CONNECTS_PER_SECOND,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY);
  properties[PROP_MAX_FRAME_SIZE] = g_param_spec_uint(
      "max-frame-size", "Max frame size",
      "Largest frame in bytes taken from a sender; every block of a larger "
      "one is rejected (the default takes 4K up to 8 bytes a pixel)",
      1, G_MAXUINT, DEFAULT_MAX_FRAME_SIZE,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY);
  properties[PROP_PROBE_AFTER] = g_param_spec_uint(
      "probe-after", "Probe after (ms)",
      "Milliseconds of silence after which a sender's lane is probed, so a "
      "sender that died without a word is found (verbs, status-byte); 0 = "
      "never",
      0, G_MAXUINT, DEFAULT_PROBE_AFTER,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY);
  properties[PROP_MAX_META_SIZE] = gst_rdma_param_spec_max_meta_size(
      "Most bytes of a frame's flags and metas taken from the wire: a "
      "larger set is dropped unread (counted in events-dropped), its frame "
      "pushed without them");
  properties[PROP_TOS] = gst_rdma_param_spec_tos();
  properties[PROP_ACK_TIMEOUT] = gst_rdma_param_spec_ack_timeout();
  properties[PROP_COMP_VECTOR] = gst_rdma_param_spec_comp_vector();
  properties[PROP_NUMA_NODE] = g_param_spec_int(
      "numa-node", "NUMA node",
      "NUMA node of the lanes' memory (verbs; shm too when set): -1 = the "
      "RDMA device's node, -2 = wherever it is first touched",
      -2, 1023, DEFAULT_NUMA_NODE,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY);
  properties[PROP_HUGE_PAGES] = g_param_spec_boolean(
      "huge-pages", "Huge pages",
      "Ask for transparent huge pages for lanes of 2 MiB or more",
      DEFAULT_HUGE_PAGES,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY);
  properties[PROP_POLL_MODE] = g_param_spec_enum(
      "poll-mode", "Poll mode",
      "How the receive thread waits for frames: adaptive (sleeps until the "
      "next frame is due), busy (spins, a whole core) or backoff",
      GST_TYPE_RDMA_POLL_MODE, DEFAULT_POLL_MODE,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY);
}

/* What each rdmasrc has of its own: its devices, their shares and
 * streams, what it reports. */
static void gst_rdma_src_install_stream_properties(void)
{
  properties[PROP_DEVICE_BLOCKS] = g_param_spec_uint(
      "device-blocks", "Device blocks",
      "Each device's share of its lane, in blocks out and frames queued, "
      "beyond which its pad's over-budget policy applies (0 = three quarters "
      "of its sender's lane over the devices with pads on it)",
      0, 65536, DEFAULT_DEVICE_BLOCKS,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY);
  properties[PROP_OVER_BUDGET] = g_param_spec_enum(
      "over-budget", "Over budget",
      "Over-budget policy of new pads (each pad has its own, e.g. "
      "src_3::over-budget=pause)",
      GST_TYPE_RDMA_OVER_BUDGET, DEFAULT_OVER_BUDGET,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY);
  properties[PROP_MAX_QUEUED] = g_param_spec_uint(
      "max-queued", "Max queued",
      "Most frames a pad with over-budget copy or pause queues before its "
      "oldest is dropped",
      1, 65536, DEFAULT_MAX_QUEUED,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY);
  properties[PROP_WAIT_FOR_KEYFRAME] = g_param_spec_boolean(
      "wait-for-keyframe", "Wait for keyframe",
      "wait-for-keyframe of every pad that has not set its own (e.g. "
      "src_3::wait-for-keyframe=false): after a gap, push no delta frame of "
      "an encoded stream until its next key frame",
      GST_RDMA_SRC_DEFAULT_WAIT_FOR_KEYFRAME,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_PLAYING);
  properties[PROP_LATENCY] = g_param_spec_int(
      "latency", "Latency",
      "Minimum latency reported in milliseconds (-1 = measured from the "
      "frames' lateness at arrival)",
      -1, G_MAXINT, DEFAULT_LATENCY,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_PLAYING);
  properties[PROP_TIMEOUT] = g_param_spec_uint(
      "timeout", "Timeout",
      "Milliseconds without a frame after which \"rdmasrc-timeout\" (no "
      "device) or \"rdmasrc-device-timeout\" (one device) is posted, once "
      "per idle spell (0 = never)",
      0, G_MAXUINT, DEFAULT_TIMEOUT,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY);
  properties[PROP_DEVICE_LOST_EOS] = g_param_spec_boolean(
      "device-lost-eos", "EOS on device lost",
      "End a device's stream with EOS when its sender goes away without "
      "one (\"rdmasrc-device-lost\" is posted either way)",
      DEFAULT_DEVICE_LOST_EOS,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY);
  properties[PROP_REQUEST_KEYFRAME] = g_param_spec_boolean(
      "request-keyframe", "Request keyframe",
      "Ask a device's sender for a key unit when a delta frame of its "
      "encoded stream comes right after a gap or mid-GOP (upstream "
      "force-key-unit events are passed on either way)",
      DEFAULT_REQUEST_KEYFRAME,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_PLAYING);
  properties[PROP_STATS] = gst_rdma_src_stats_param_spec();
  properties[PROP_STATS_INTERVAL] = gst_rdma_param_spec_stats_interval(
      "rdmasrc-stats", "rdmasrc-device-stats");
  properties[PROP_DEVICE_ID] = g_param_spec_int(
      "device-id", "Device ID",
      "The one camera this rdmasrc receives, on pad src_<N> from the start "
      "(rdmasrcs of a process on one port share a receiver).  -1: every "
      "device no other rdmasrc on the port asked for",
      -1, SBR_MAX_DEVICES - 1, DEFAULT_DEVICE_ID,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY);
  properties[PROP_URI] = gst_rdma_uri_param_spec();
  properties[PROP_TIMESTAMP_MODE] = g_param_spec_enum(
      "timestamp-mode", "Timestamp mode",
      "How buffers are stamped: skew (the sender's time through an estimate "
      "of its clock), capture (its capture time through our wall clock), "
      "sender (its running time as it is) or arrival",
      GST_TYPE_RDMA_TIMESTAMP_MODE, DEFAULT_TIMESTAMP_MODE,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY);
}

guint gst_rdma_src_deserialize_meta_signal;

static void gst_rdma_src_class_init(GstRdmaSrcClass *klass)
{
  GObjectClass *gobject_class = G_OBJECT_CLASS(klass);
  GstElementClass *element_class = GST_ELEMENT_CLASS(klass);

  gobject_class->finalize = gst_rdma_src_finalize;
  gobject_class->set_property = gst_rdma_src_set_property;
  gobject_class->get_property = gst_rdma_src_get_property;

  gst_rdma_src_install_receiver_properties();
  gst_rdma_src_install_stream_properties();
  g_object_class_install_properties(gobject_class, N_PROPERTIES, properties);

  /**
   * GstRdmaSrc::deserialize-meta:
   * @src: the rdmasrc
   * @buffer: the frame, writable
   * @api: the name of the meta's API type on the sender
   * @fields: what the sender's #GstRdmaSink::serialize-meta handler wrote
   *
   * Emitted on the receive thread for each meta an rdmasink's application
   * wrote out, only while a handler is connected.  A handler that knows
   * @api adds the meta to @buffer from @fields and returns %TRUE.
   *
   * Returns: %TRUE when the meta was put back (else it is counted in
   *   metas-not-restored)
   */
  gst_rdma_src_deserialize_meta_signal = g_signal_new(
      "deserialize-meta", G_TYPE_FROM_CLASS(klass), G_SIGNAL_RUN_LAST, 0,
      g_signal_accumulator_true_handled, NULL, NULL, G_TYPE_BOOLEAN, 3,
      GST_TYPE_BUFFER | G_SIGNAL_TYPE_STATIC_SCOPE, G_TYPE_STRING,
      GST_TYPE_STRUCTURE | G_SIGNAL_TYPE_STATIC_SCOPE);

  /* The sometimes template first: an unnamed link looks at templates in
   * this order and, finding no pad, waits for one (see above).  Both carry
   * the pad type, so gst-inspect-1.0 and the documentation list the pads'
   * own properties (over-budget), as compositor's pads do. */
  gst_element_class_add_pad_template(
      element_class, gst_pad_template_new_from_static_pad_template_with_gtype(
                         &src_sometimes_template, GST_TYPE_RDMA_SRC_PAD));
  gst_element_class_add_pad_template(
      element_class, gst_pad_template_new_from_static_pad_template_with_gtype(
                         &src_template, GST_TYPE_RDMA_SRC_PAD));
  gst_type_mark_as_plugin_api(GST_TYPE_RDMA_SRC_PAD, 0);
  gst_element_class_set_static_metadata(
      element_class, "RDMA source", "Source/Network",
      "Receives the devices of rdmasinks over one-sided RDMA, one pad per "
      "device",
      GST_RDMA_ELEMENT_AUTHOR);

  element_class->change_state = GST_DEBUG_FUNCPTR(gst_rdma_src_change_state);
  element_class->query = GST_DEBUG_FUNCPTR(gst_rdma_src_query);
  element_class->send_event = GST_DEBUG_FUNCPTR(gst_rdma_src_send_event);
  element_class->request_new_pad =
      GST_DEBUG_FUNCPTR(gst_rdma_src_request_new_pad);
  element_class->release_pad = GST_DEBUG_FUNCPTR(gst_rdma_src_release_pad);

  GST_DEBUG_CATEGORY_INIT(gst_rdma_src_debug, "rdmasrc", 0, "RDMA source");
}

static void gst_rdma_src_init(GstRdmaSrc *self)
{
  self->address = g_strdup(DEFAULT_ADDRESS);
  self->port = GST_RDMA_DEFAULT_PORT;
  self->transport = GST_RDMA_DEFAULT_TRANSPORT;
  self->mechanism = GST_RDMA_DEFAULT_MECHANISM;
  self->blocks = DEFAULT_BLOCKS;
  self->block_size = DEFAULT_BLOCK_SIZE;
  self->max_held = DEFAULT_MAX_HELD;
  self->device_blocks = DEFAULT_DEVICE_BLOCKS;
  self->max_queued = DEFAULT_MAX_QUEUED;
  self->over_budget = DEFAULT_OVER_BUDGET;
  self->timestamp_mode = DEFAULT_TIMESTAMP_MODE;
  self->wait_for_keyframe = GST_RDMA_SRC_DEFAULT_WAIT_FOR_KEYFRAME;
  self->max_senders = DEFAULT_MAX_SENDERS;
  self->allowed_senders = DEFAULT_ALLOWED_SENDERS;
  self->max_connects_per_second = DEFAULT_MAX_CONNECTS_PER_SECOND;
  self->max_frame_size = DEFAULT_MAX_FRAME_SIZE;
  self->probe_after = DEFAULT_PROBE_AFTER;
  self->tos = GST_RDMA_DEFAULT_TOS;
  self->max_meta_size = GST_RDMA_DEFAULT_MAX_META_SIZE;
  self->ack_timeout = GST_RDMA_DEFAULT_ACK_TIMEOUT;
  self->comp_vector = GST_RDMA_DEFAULT_COMP_VECTOR;
  self->numa_node = DEFAULT_NUMA_NODE;
  self->huge_pages = DEFAULT_HUGE_PAGES;
  self->latency = DEFAULT_LATENCY;
  self->timeout = DEFAULT_TIMEOUT;
  self->device_lost_eos = DEFAULT_DEVICE_LOST_EOS;
  self->request_keyframe = DEFAULT_REQUEST_KEYFRAME;
  self->stats_interval = GST_RDMA_DEFAULT_STATS_INTERVAL;
  self->poll_mode = DEFAULT_POLL_MODE;

  self->device_id = DEFAULT_DEVICE_ID;
  gst_rdma_receiver_member_init(&self->member, GST_ELEMENT(self),
                                &member_funcs);
  g_mutex_init(&self->state_lock);
  g_mutex_init(&self->flow.lock);
  self->flow.combiner = gst_flow_combiner_new();
  /* A live source: it never prerolls. */
  GST_OBJECT_FLAG_SET(self, GST_ELEMENT_FLAG_SOURCE);
}

static void gst_rdma_src_finalize(GObject *object)
{
  GstRdmaSrc *self = GST_RDMA_SRC(object);

  for (guint i = 0; i < 2 * SBR_MAX_DEVICES; i++) {
    GstRdmaSrcDevice *dev = i < SBR_MAX_DEVICES
                                ? self->devices[i]
                                : self->requested[i - SBR_MAX_DEVICES];

    if (dev)
      gst_rdma_src_device_free(dev);
  }
  gst_rdma_src_events_free(self);
  gst_rdma_receiver_member_clear(&self->member);
  gst_flow_combiner_free(self->flow.combiner);
  g_mutex_clear(&self->flow.lock);
  g_mutex_clear(&self->state_lock);
  g_free(self->uri_error);
  g_free(self->address);
  g_free(self->allowed_senders);
  G_OBJECT_CLASS(parent_class)->finalize(object);
}

/* device-id: the pad of that one device, made now so that links to it
 * (an unnamed `rdmasrc device-id=3 ! sink` too) are made at once.  It is
 * the element's own pad, not one an application requested: it comes from
 * the sometimes template (as a demuxer's stream pads), so nobody releases
 * it as a request pad and gst-inspect shows where it comes from. */
static void gst_rdma_src_set_device_id(GstRdmaSrc *self, gint device_id)
{
  GstPadTemplate *templ =
      gst_element_class_get_pad_template(GST_ELEMENT_GET_CLASS(self), "src_%s");
  gchar name[16];
  GstPad *pad;
  gint old;

  GST_OBJECT_LOCK(self);
  old = self->device_id;
  self->device_id = device_id;
  GST_OBJECT_UNLOCK(self);
  if (old == device_id)
    return;
  if (old >= 0) {
    g_snprintf(name, sizeof name, "src_%d", old);
    pad = gst_element_get_static_pad(GST_ELEMENT(self), name);
    if (pad) {
      /* Not gst_element_release_request_pad: not a request pad. */
      gst_rdma_src_release_pad(GST_ELEMENT(self), pad);
      gst_object_unref(pad);
    }
  }
  if (device_id < 0)
    return;
  g_snprintf(name, sizeof name, "src_%d", device_id);
  pad = gst_element_get_static_pad(GST_ELEMENT(self), name);
  if (pad)
    gst_object_unref(pad); /* requested before: it stays as it is */
  else if (!gst_rdma_src_request_new_pad(GST_ELEMENT(self), templ, name, NULL))
    GST_WARNING_OBJECT(self, "no pad %s", name);
}

/* Where each plain property lives (gstrdmaproperties.h). */
static const gsize fields[N_PROPERTIES] = {
    [PROP_ADDRESS] = G_STRUCT_OFFSET(GstRdmaSrc, address),
    [PROP_PORT] = G_STRUCT_OFFSET(GstRdmaSrc, port),
    [PROP_TRANSPORT] = G_STRUCT_OFFSET(GstRdmaSrc, transport),
    [PROP_MECHANISM] = G_STRUCT_OFFSET(GstRdmaSrc, mechanism),
    [PROP_BLOCKS] = G_STRUCT_OFFSET(GstRdmaSrc, blocks),
    [PROP_BLOCK_SIZE] = G_STRUCT_OFFSET(GstRdmaSrc, block_size),
    [PROP_MAX_HELD] = G_STRUCT_OFFSET(GstRdmaSrc, max_held),
    [PROP_DEVICE_BLOCKS] = G_STRUCT_OFFSET(GstRdmaSrc, device_blocks),
    [PROP_OVER_BUDGET] = G_STRUCT_OFFSET(GstRdmaSrc, over_budget),
    [PROP_MAX_QUEUED] = G_STRUCT_OFFSET(GstRdmaSrc, max_queued),
    [PROP_WAIT_FOR_KEYFRAME] = G_STRUCT_OFFSET(GstRdmaSrc, wait_for_keyframe),
    [PROP_MAX_SENDERS] = G_STRUCT_OFFSET(GstRdmaSrc, max_senders),
    /* Checked when the element starts: a bad list must stop it, not be
     * ignored with a warning and leave the receiver open to anyone. */
    [PROP_ALLOWED_SENDERS] = G_STRUCT_OFFSET(GstRdmaSrc, allowed_senders),
    [PROP_MAX_CONNECTS_PER_SECOND] =
        G_STRUCT_OFFSET(GstRdmaSrc, max_connects_per_second),
    [PROP_MAX_FRAME_SIZE] = G_STRUCT_OFFSET(GstRdmaSrc, max_frame_size),
    [PROP_PROBE_AFTER] = G_STRUCT_OFFSET(GstRdmaSrc, probe_after),
    [PROP_TOS] = G_STRUCT_OFFSET(GstRdmaSrc, tos),
    [PROP_ACK_TIMEOUT] = G_STRUCT_OFFSET(GstRdmaSrc, ack_timeout),
    [PROP_COMP_VECTOR] = G_STRUCT_OFFSET(GstRdmaSrc, comp_vector),
    [PROP_NUMA_NODE] = G_STRUCT_OFFSET(GstRdmaSrc, numa_node),
    [PROP_HUGE_PAGES] = G_STRUCT_OFFSET(GstRdmaSrc, huge_pages),
    [PROP_LATENCY] = G_STRUCT_OFFSET(GstRdmaSrc, latency),
    [PROP_TIMEOUT] = G_STRUCT_OFFSET(GstRdmaSrc, timeout),
    [PROP_DEVICE_LOST_EOS] = G_STRUCT_OFFSET(GstRdmaSrc, device_lost_eos),
    [PROP_REQUEST_KEYFRAME] = G_STRUCT_OFFSET(GstRdmaSrc, request_keyframe),
    [PROP_STATS_INTERVAL] = G_STRUCT_OFFSET(GstRdmaSrc, stats_interval),
    [PROP_POLL_MODE] = G_STRUCT_OFFSET(GstRdmaSrc, poll_mode),
    [PROP_DEVICE_ID] = G_STRUCT_OFFSET(GstRdmaSrc, device_id),
    [PROP_TIMESTAMP_MODE] = G_STRUCT_OFFSET(GstRdmaSrc, timestamp_mode),
    [PROP_MAX_META_SIZE] = G_STRUCT_OFFSET(GstRdmaSrc, max_meta_size),
};

static const GstRdmaPropertyTable property_table = {
    fields, N_PROPERTIES, G_STRUCT_OFFSET(GstRdmaSrc, uri_error)};

/* The element's policy, and also its one camera's pad's, made when
 * device-id was set (maybe before this on a launch line). */
static void gst_rdma_src_set_over_budget(GstRdmaSrc *self,
                                         GstRdmaOverBudget policy)
{
  gchar name[16];
  GstPad *pad = NULL;
  gint device_id;

  GST_OBJECT_LOCK(self);
  self->over_budget = policy;
  self->over_budget_set = TRUE; /* wins over a stream's liveness */
  device_id = self->device_id;
  GST_OBJECT_UNLOCK(self);
  g_snprintf(name, sizeof name, "src_%d", device_id);
  if (device_id >= 0)
    pad = gst_element_get_static_pad(GST_ELEMENT(self), name);
  if (pad) {
    g_object_set(pad, "over-budget", policy, NULL);
    gst_object_unref(pad);
  }
}

static gboolean set_pad_wait_for_keyframe(GstElement *element, GstPad *pad,
                                          gpointer data)
{
  (void)element;
  gst_rdma_src_pad_set_default_wait_for_keyframe(GST_RDMA_SRC_PAD(pad),
                                                 GPOINTER_TO_INT(data));
  return TRUE;
}

/* The default of the pads there are and of those to come (a launch line
 * may set it after device-id made the pad). */
static void gst_rdma_src_set_wait_for_keyframe(GstRdmaSrc *self, gboolean wait)
{
  GST_OBJECT_LOCK(self);
  self->wait_for_keyframe = wait;
  GST_OBJECT_UNLOCK(self);
  gst_element_foreach_src_pad(GST_ELEMENT(self), set_pad_wait_for_keyframe,
                              GINT_TO_POINTER(wait));
}

/* Set while PAUSED or PLAYING, the pipeline asks every element again and
 * configures what the new value gives (GstBin recalculates on the
 * message); stopped, the next LATENCY query reads it anyway. */
static void gst_rdma_src_set_latency(GstRdmaSrc *self, gint latency)
{
  gboolean changed;

  GST_OBJECT_LOCK(self);
  /* GST_STATE is read under the object lock. */
  changed = self->latency != latency && GST_STATE(self) >= GST_STATE_PAUSED;
  self->latency = latency;
  GST_OBJECT_UNLOCK(self);
  if (changed)
    gst_element_post_message(GST_ELEMENT(self),
                             gst_message_new_latency(GST_OBJECT(self)));
}

static void gst_rdma_src_set_property(GObject *object, guint prop_id,
                                      const GValue *value, GParamSpec *pspec)
{
  GstRdmaSrc *self = GST_RDMA_SRC(object);

  switch (prop_id) {
  case PROP_DEVICE_ID:
    /* Makes or releases pads: not under the object lock. */
    gst_rdma_src_set_device_id(self, g_value_get_int(value));
    break;
  case PROP_OVER_BUDGET:
    gst_rdma_src_set_over_budget(self, g_value_get_enum(value));
    break;
  case PROP_WAIT_FOR_KEYFRAME:
    gst_rdma_src_set_wait_for_keyframe(self, g_value_get_boolean(value));
    break;
  case PROP_LATENCY:
    gst_rdma_src_set_latency(self, g_value_get_int(value));
    break;
  default:
    if (!gst_rdma_property_set(object, &property_table, prop_id, pspec, value))
      G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
    break;
  }
}

static void gst_rdma_src_get_property(GObject *object, guint prop_id,
                                      GValue *value, GParamSpec *pspec)
{
  if (prop_id == PROP_STATS) {
    /* Takes the object lock itself. */
    g_value_take_boxed(value, gst_rdma_src_get_stats(GST_ELEMENT(object)));
    return;
  }
  if (!gst_rdma_property_get(object, &property_table, prop_id, pspec, value))
    G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
}

/* ------------------------------------------------------------ stats */

static GstStructure *gst_rdma_src_get_stats(GstElement *element)
{
  GstRdmaSrc *self = GST_RDMA_SRC(element);
  GstRdmaSrcCounters counters;
  GstStructure *s;

  /* The device table only changes under the object lock too. */
  GST_OBJECT_LOCK(self);
  counters.copies = self->copies;
  counters.no_caps_drops = self->no_caps_drops;
  counters.events_received = self->events_received;
  counters.events_dropped = self->events_dropped;
  counters.extras_dropped = self->extras_dropped;
  counters.metas_not_restored = self->metas_not_restored;
  counters.held = self->held ? (guint)g_atomic_int_get(&self->held->count) : 0;
  counters.device_blocks = self->shared ? gst_rdma_src_least_budget(self) : 0;
  for (guint d = 0; d < SBR_MAX_DEVICES; d++)
    counters.shares[d] = self->shared && self->devices[d]
                             ? gst_rdma_src_budget(self, self->devices[d])
                             : 0;
  counters.unclaimed_drops =
      self->shared ? gst_rdma_receiver_unclaimed_drops(self->shared) : 0;
  counters.receiver_members =
      self->shared ? gst_rdma_receiver_members(self->shared) : 0;
  counters.timestamp_mode =
      self->shared ? self->timestamp_mode_now : self->timestamp_mode;
  s = gst_rdma_src_stats_new(self->shared ? self->receiver : NULL,
                             self->devices, &counters);
  GST_OBJECT_UNLOCK(self);
  return s;
}

static gboolean gst_rdma_src_query(GstElement *element, GstQuery *query)
{
  if (GST_QUERY_TYPE(query) == GST_QUERY_LATENCY) {
    gst_rdma_src_answer_latency(GST_RDMA_SRC(element), query);
    return TRUE;
  }
  return GST_ELEMENT_CLASS(parent_class)->query(element, query);
}

/* EOS sent to the element (gst-launch -e on Ctrl-C, an application
 * ending a recording), as GstBaseSrc does: every pad's stream ends and
 * nothing more is delivered; senders are left alone. */
static gboolean gst_rdma_src_send_event(GstElement *element, GstEvent *event)
{
  GstRdmaSrc *self = GST_RDMA_SRC(element);

  if (GST_EVENT_TYPE(event) != GST_EVENT_EOS)
    return GST_ELEMENT_CLASS(parent_class)->send_event(element, event);
  gst_event_unref(event);
  GST_INFO_OBJECT(self, "EOS requested");
  g_atomic_int_set(&self->eos_requested, 1);
  GST_OBJECT_LOCK(self);
  if (self->shared)
    sbr_receiver_wakeup(self->receiver);
  GST_OBJECT_UNLOCK(self);
  return TRUE;
}

/* ----------------------------------------------------- state changes */

/* libsbr refused a sender (receive thread): tell the application who and
 * why, once per sender host and reason every few seconds. */
static void gst_rdma_src_refused(GstElement *element, const gchar *peer,
                                 gint reason, const gchar *text)
{
  GstRdmaSrc *self = GST_RDMA_SRC(element);

  gst_rdma_refusals_warn(self->refusals, element, peer, reason, text);
}

/* A sender connected or left (receive thread): tell the application, on
 * every rdmasrc sharing the receiver (see the SECTION). */
static void gst_rdma_src_sender(GstElement *element, guint lane,
                                const gchar *peer, gboolean connected)
{
  GST_INFO_OBJECT(element, "sender %s on lane %u %s", peer, lane,
                  connected ? "connected" : "left");
  gst_element_post_message(
      element,
      gst_message_new_element(
          GST_OBJECT(element),
          gst_structure_new(
              connected ? "rdmasrc-sender-connected" : "rdmasrc-sender-left",
              "peer", G_TYPE_STRING, peer, "lane", G_TYPE_UINT, lane, NULL)));
}

static const GstRdmaReceiverMemberFuncs member_funcs = {
    .turn = gst_rdma_src_turn,
    .frame = gst_rdma_src_frame,
    .failed = gst_rdma_src_failed,
    .refused = gst_rdma_src_refused,
    .sender = gst_rdma_src_sender,
    .has_device = gst_rdma_src_has_device,
    .leaving = gst_rdma_src_leaving,
};

/* Object lock held: what the receiver is made with (address and
 * allowed_senders are copies for the caller to free), and what this
 * rdmasrc runs with from now until it stops. */
static void gst_rdma_src_take_config_locked(GstRdmaSrc *self,
                                            GstRdmaReceiverConfig *cfg)
{
  cfg->transport = self->transport;
  cfg->address = g_strdup(self->address);
  cfg->port = self->port;
  cfg->mechanism = self->mechanism;
  cfg->blocks = self->blocks;
  cfg->block_size = self->block_size;
  cfg->max_senders = self->max_senders;
  cfg->allowed_senders = g_strdup(self->allowed_senders);
  cfg->max_connects_per_second = self->max_connects_per_second;
  cfg->max_frame_size = self->max_frame_size;
  cfg->probe_after = self->probe_after;
  cfg->tos = self->tos;
  cfg->ack_timeout = self->ack_timeout;
  cfg->comp_vector = self->comp_vector;
  cfg->numa_node = self->numa_node;
  cfg->huge_pages = self->huge_pages;
  cfg->poll_mode = self->poll_mode;
  cfg->max_held = self->max_held;
  self->member.device = self->device_id;
  /* Never all of a lane: the sender must always find a free block. */
  self->max_held_now = MIN(self->max_held, self->blocks - 1);
  /* The sliding window ACKs strictly in slot order: one buffer a sink keeps
   * (a last-sample, a compositor's current frame) would stop every stream
   * behind it for good.  Holding blocks is the status-byte mechanism's
   * strength; the baseline gets copies, released at once. */
  if (cfg->mechanism == GST_RDMA_MECHANISM_SLIDING_WINDOW)
    self->max_held_now = 0;
  self->device_blocks_now = self->device_blocks;
  self->usable_blocks = self->blocks - self->blocks / 4;
  /* n_pads is not reset: the pads live as long as the element. */
  self->max_queued_now = self->max_queued;
  self->can_pause = cfg->mechanism == GST_RDMA_MECHANISM_STATUS_BYTE;
  self->timeout_now = self->timeout;
  self->device_lost_eos_now = self->device_lost_eos;
  self->timestamp_mode_now = self->timestamp_mode;
}

static void gst_rdma_src_config_clear(GstRdmaReceiverConfig *cfg)
{
  g_free((gchar *)cfg->address);
  g_free((gchar *)cfg->allowed_senders);
}

/* The receiver parses allowed-senders too; parsed here first for a
 * message of our own. */
static gboolean gst_rdma_src_check_allowed(GstRdmaSrc *self,
                                           const GstRdmaReceiverConfig *cfg)
{
  const gchar *allowed = cfg->allowed_senders;
  sbr_addr_list *list = NULL;
  char errbuf[256] = "";
  int ret;

  ret = sbr_addr_list_parse(allowed, &list, errbuf, sizeof errbuf);
  if (ret < 0) {
    const gchar *why = errbuf[0] ? errbuf : g_strerror(-ret);

    if (g_str_has_prefix(why, "allowed senders, "))
      why += strlen("allowed senders, ");
    GST_ELEMENT_ERROR(self, RESOURCE, SETTINGS,
                      ("Invalid allowed-senders \"%s\": %s.", allowed, why),
                      ("%s", errbuf));
    return FALSE;
  }
  GST_INFO_OBJECT(self,
                  "allowed senders: %s, at most %u connection "
                  "attempts a second",
                  list ? allowed : "anyone", cfg->max_connects_per_second);
  sbr_addr_list_free(list);
  return TRUE;
}

/* Before joining: the receive thread calls us from then on. */
static void gst_rdma_src_reset_run(GstRdmaSrc *self)
{
  self->refusals = gst_rdma_refusals_new();
  self->copies = self->no_caps_drops = 0;
  self->events_received = self->events_dropped = 0;
  self->extras_dropped = self->metas_not_restored = 0;
  gst_rdma_src_events_free(self); /* the last run's senders' streams */
  self->n_paused = 0;
  self->group_id = gst_util_group_id_next();
  self->last_activity = g_get_monotonic_time();
  self->timeout_posted = FALSE;
  self->eos_done = FALSE;
  g_atomic_int_set(&self->eos_requested, 0);
  gst_flow_combiner_reset(self->flow.combiner);
}

/* Joins the process's receiver for cfg, or posts why not. */
static GstRdmaReceiver *gst_rdma_src_join(GstRdmaSrc *self,
                                          const GstRdmaReceiverConfig *cfg)
{
  GstRdmaReceiver *shared;
  GError *error = NULL;

  shared = gst_rdma_receiver_join(cfg, &self->member, &error);
  if (shared)
    return shared;
  if (error->code == GST_RESOURCE_ERROR_SETTINGS)
    GST_ELEMENT_ERROR(self, RESOURCE, SETTINGS, ("%s", error->message), (NULL));
  else
    GST_ELEMENT_ERROR(self, RESOURCE, OPEN_READ,
                      ("Could not listen on %s:%u.", cfg->address, cfg->port),
                      ("%s", error->message));
  g_clear_error(&error);
  gst_rdma_refusals_free(self->refusals);
  self->refusals = NULL;
  return NULL;
}

/* Joins the process's receiver for our transport, address and port
 * (listening if we are the first) and gets ready for our devices' frames,
 * which its receive thread hands us from now on. */
static gboolean gst_rdma_src_open(GstRdmaSrc *self)
{
  GstRdmaReceiverConfig cfg;
  GstRdmaReceiver *shared;
  guint stats_interval;
  gint device_id;

  GST_OBJECT_LOCK(self);
  if (!gst_rdma_uri_error_check_locked(GST_ELEMENT(self), self->uri_error))
    return FALSE;
  gst_rdma_src_take_config_locked(self, &cfg);
  stats_interval = self->stats_interval;
  device_id = self->device_id;
  GST_OBJECT_UNLOCK(self);
  if (!gst_rdma_src_check_allowed(self, &cfg)) {
    gst_rdma_src_config_clear(&cfg);
    return FALSE;
  }
  gst_rdma_src_reset_run(self);
  shared = gst_rdma_src_join(self, &cfg);
  if (shared)
    GST_INFO_OBJECT(self,
                    "receiving on %s:%u, device %d, %u blocks of %u bytes, "
                    "device-blocks %u",
                    cfg.address, cfg.port, device_id, cfg.blocks,
                    cfg.block_size, self->device_blocks_now);
  gst_rdma_src_config_clear(&cfg);
  if (!shared)
    return FALSE;

  GST_OBJECT_LOCK(self);
  self->receiver = gst_rdma_receiver_get_sbr(shared);
  self->held = g_atomic_rc_box_acquire(gst_rdma_receiver_get_held(shared));
  gst_rdma_receiver_add_pads(shared, (gint)self->n_pads);
  /* Pads requested while we joined (after the receiver asked which we
   * have) are routed to us too. */
  for (guint d = 0; d < SBR_MAX_DEVICES; d++)
    if (self->requested[d] ||
        (self->devices[d] && !g_atomic_int_get(&self->devices[d]->released)))
      gst_rdma_receiver_route_pad(shared, &self->member, d, TRUE);
  self->shared = shared;
  GST_OBJECT_UNLOCK(self);
  self->ticker = gst_rdma_stats_ticker_start(GST_ELEMENT(self), stats_interval,
                                             gst_rdma_src_get_stats);
  if (device_id >= 0) {
    /* One camera, its pad there from the start: nothing more will come
     * (uridecodebin, playbin and decodebin wait for this). */
    gst_element_no_more_pads(GST_ELEMENT(self));
  }
  return TRUE;
}

/* Leaves the shared receiver: from then on its receive thread never calls
 * us; the last rdmasrc out closes the listener. */
static void gst_rdma_src_leave(GstRdmaSrc *self)
{
  GstRdmaReceiver *shared;
  guint n_pads;

  /* Together: a pad counted from now on is counted in n_pads alone. */
  GST_OBJECT_LOCK(self);
  shared = self->shared;
  if (shared)
    gst_rdma_src_uncount_lanes(self);
  self->shared = NULL;
  n_pads = self->n_pads;
  GST_OBJECT_UNLOCK(self);
  if (!shared)
    return;
  gst_rdma_receiver_add_pads(shared, -(gint)n_pads);
  gst_rdma_receiver_leave(shared, &self->member);
}

static void gst_rdma_src_close(GstRdmaSrc *self)
{
  GstRdmaHeldCounter *held;

  gst_rdma_src_leave(self);
  gst_rdma_stats_ticker_stop(self->ticker);
  self->ticker = NULL;
  gst_rdma_src_end_streams(self);
  gst_rdma_refusals_free(self->refusals);
  self->refusals = NULL;
  /* Stats read them under the object lock. */
  GST_OBJECT_LOCK(self);
  self->receiver = NULL;
  held = self->held;
  self->held = NULL;
  GST_OBJECT_UNLOCK(self);
  if (held)
    gst_rdma_held_counter_unref(held);
}

/* PLAYING: every pad's task pushes; else they wait, queues emptied. */
static void gst_rdma_src_set_playing(GstRdmaSrc *self, gboolean playing)
{
  g_mutex_lock(&self->state_lock);
  /* Our running time skipped the time spent PAUSED: every device's next
   * frame is a new base, or sync=true sinks would hold each frame back
   * by the length of the pause. */
  if (playing)
    g_atomic_int_inc(&self->rebase_count);
  g_atomic_int_set(&self->playing, playing);
  for (guint d = 0; d < SBR_MAX_DEVICES; d++) {
    GstRdmaSrcDevice *dev = self->devices[d];

    if (!dev || g_atomic_int_get(&dev->released))
      continue;
    if (playing)
      gst_rdma_src_pad_start(dev->pad);
    else
      gst_rdma_src_pad_pause(dev->pad);
  }
  g_mutex_unlock(&self->state_lock);
}

static GstStateChangeReturn gst_rdma_src_change_state(GstElement *element,
                                                      GstStateChange transition)
{
  GstRdmaSrc *self = GST_RDMA_SRC(element);
  GstStateChangeReturn ret;

  switch (transition) {
  case GST_STATE_CHANGE_READY_TO_PAUSED:
    /* Pads requested while stopped join the table before we do. */
    gst_rdma_src_adopt_requested(self);
    /* Receiving (and accepting senders) starts now; frames are queued
     * only while PLAYING. */
    if (!gst_rdma_src_open(self))
      return GST_STATE_CHANGE_FAILURE;
    break;
  case GST_STATE_CHANGE_PLAYING_TO_PAUSED:
    gst_rdma_src_set_playing(self, FALSE);
    break;
  case GST_STATE_CHANGE_PAUSED_TO_READY:
    /* Before the pads are deactivated (which waits for their stream
     * locks): downstream is READY already, so no push blocks. */
    gst_rdma_src_leave(self);
    g_mutex_lock(&self->state_lock);
    for (guint d = 0; d < SBR_MAX_DEVICES; d++)
      if (self->devices[d])
        gst_rdma_src_pad_stop(self->devices[d]->pad);
    g_mutex_unlock(&self->state_lock);
    break;
  default:
    break;
  }

  ret = GST_ELEMENT_CLASS(parent_class)->change_state(element, transition);
  if (ret == GST_STATE_CHANGE_FAILURE) {
    if (transition == GST_STATE_CHANGE_READY_TO_PAUSED) {
      /* Undo the open: out of the shared receiver. */
      gst_rdma_src_close(self);
    }
    return ret;
  }

  switch (transition) {
  case GST_STATE_CHANGE_READY_TO_PAUSED:
  case GST_STATE_CHANGE_PLAYING_TO_PAUSED:
    ret = GST_STATE_CHANGE_NO_PREROLL;
    break;
  case GST_STATE_CHANGE_PAUSED_TO_PLAYING:
    /* Buffers get running times: queue and push only while PLAYING. */
    gst_rdma_src_set_playing(self, TRUE);
    break;
  case GST_STATE_CHANGE_PAUSED_TO_READY:
    gst_rdma_src_close(self);
    break;
  default:
    break;
  }
  return ret;
}
