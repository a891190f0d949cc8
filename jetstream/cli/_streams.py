"""``stream ls|info|add|rm|purge|get`` and ``consumer ls|info|add|rm|next``."""

from __future__ import annotations

from typing import Any

import msgspec

from ..api import (
    AckPolicy,
    ConsumerConfig,
    ConsumerInfo,
    DeliverPolicy,
    DiscardPolicy,
    ReplayPolicy,
    RetentionPolicy,
    StorageType,
    StreamConfig,
    StreamInfo,
)
from ..errors import StreamNameInUseError
from ..message import JsMsg
from ._core import print_msg
from ._session import Session
from ._util import CliError, fmt_bytes, fmt_duration, fmt_num, fmt_time

__all__ = [
    "BUCKET_STREAMS",
    "cmd_consumer_add",
    "cmd_consumer_info",
    "cmd_consumer_ls",
    "cmd_consumer_next",
    "cmd_consumer_rm",
    "cmd_stream_add",
    "cmd_stream_edit",
    "cmd_stream_get",
    "cmd_stream_info",
    "cmd_stream_ls",
    "cmd_stream_purge",
    "cmd_stream_rm",
    "split_list",
]


def split_list(values: list[str] | None) -> list[str]:
    """Repeated and comma-separated option values as one list (``-s a,b -s c``)."""
    return [v.strip() for item in values or () for v in item.split(",") if v.strip()]


def _set(value: Any) -> Any:
    """None (option not given) -> UNSET (left to the server's default)."""
    return msgspec.UNSET if value is None else value


def _opt(value: Any) -> Any:
    """A config value for display: UNSET/None -> None (the line is left out)."""
    return None if value is msgspec.UNSET or value is None else value


def _limit(value: Any, fmt: Any = fmt_num) -> str:
    v = _opt(value)
    return "unlimited" if v is None or v < 0 else fmt(v)


# -- streams ------------------------------------------------------------------------------


def _stream_view(s: Session, info: StreamInfo) -> None:
    cfg, st = info.config, info.state
    subjects = ", ".join(_opt(cfg.subjects) or [])
    s.out.view(
        f"Stream {cfg.name} (created {fmt_time(info.created)})",
        [
            (
                "Configuration",
                [
                    ("Subjects", subjects),
                    ("Description", _opt(cfg.description)),
                    ("Storage", cfg.storage.value),
                    ("Replicas", _opt(cfg.num_replicas) or 1),
                    ("Retention", cfg.retention.value),
                    ("Discard", cfg.discard.value),
                    ("Max messages", _limit(cfg.max_msgs)),
                    ("Max per subject", _limit(cfg.max_msgs_per_subject)),
                    ("Max bytes", _limit(cfg.max_bytes, fmt_bytes)),
                    ("Max age", fmt_duration(_opt(cfg.max_age)) if _opt(cfg.max_age) else "-"),
                    ("Max message size", _limit(cfg.max_msg_size, fmt_bytes)),
                    ("Duplicate window", fmt_duration(_opt(cfg.duplicate_window))),
                    ("Allow direct", _opt(cfg.allow_direct)),
                    ("Counters", _opt(cfg.allow_msg_counter) or None),
                    ("Schedules", _opt(cfg.allow_msg_schedules) or None),
                    ("Message TTLs", _opt(cfg.allow_msg_ttl) or None),
                    ("Sealed", _opt(cfg.sealed) or None),
                ],
            ),
            (
                "State",
                [
                    ("Messages", fmt_num(st.messages)),
                    ("Bytes", fmt_bytes(st.bytes)),
                    ("First sequence", f"{st.first_seq} @ {fmt_time(st.first_ts)}"),
                    ("Last sequence", f"{st.last_seq} @ {fmt_time(st.last_ts)}"),
                    ("Deleted messages", st.num_deleted or None),
                    ("Subjects", st.num_subjects),
                    ("Consumers", st.consumer_count),
                ],
            ),
        ],
    )


#: the name prefixes of the streams of KeyValue and object store buckets, which ``stream
#: ls`` leaves out unless ``--all`` (as the nats CLI does)
BUCKET_STREAMS = ("KV_", "OBJ_")


def _hidden_note(s: Session, hidden: int) -> None:
    if hidden and not s.out.json:
        what = (
            "1 stream of a KeyValue or object store bucket; --all lists it"
            if hidden == 1
            else f"{hidden} streams of KeyValue or object store buckets; --all lists them"
        )
        s.out.info(f"(not shown: {what})")


async def cmd_stream_ls(s: Session) -> int:
    a, out = s.args, s.out
    if a.names:
        every = sorted([n async for n in s.js.stream_names(subject=a.subject)])
        names = [n for n in every if a.all or not n.startswith(BUCKET_STREAMS)]
        if out.json:
            out.json_doc(names)
        else:
            for name in names:
                out.line(name)
        _hidden_note(s, len(every) - len(names))
        return 0
    every_info = [i async for i in s.js.streams(subject=a.subject)]
    infos = sorted(
        (i for i in every_info if a.all or not i.config.name.startswith(BUCKET_STREAMS)),
        key=lambda i: i.config.name,
    )
    if out.json:
        out.json_doc(infos)
        return 0
    if not infos:
        out.line("No streams defined")
        _hidden_note(s, len(every_info))
        return 0
    rows = [
        (
            i.config.name,
            ", ".join(_opt(i.config.subjects) or []),
            i.config.storage.value,
            fmt_num(i.state.messages),
            fmt_bytes(i.state.bytes),
            i.state.consumer_count,
            fmt_time(i.state.last_ts),
        )
        for i in infos
    ]
    cols = ("Name", "Subjects", "Storage", "Messages", "Size", "Consumers", "Last message")
    out.table(f"Streams ({len(infos)})", cols, rows, right=(3, 4, 5))
    _hidden_note(s, len(every_info) - len(infos))
    return 0


async def cmd_stream_info(s: Session) -> int:
    stream = await s.js.stream(s.args.stream)
    info = await stream.info()
    if s.out.json:
        s.out.json_doc(info)
    else:
        _stream_view(s, info)
    return 0


async def cmd_stream_add(s: Session) -> int:
    a = s.args
    cfg = StreamConfig(
        name=a.stream,
        subjects=split_list(a.subjects) or [a.stream],
        description=_set(a.description),
        storage=StorageType(a.storage),
        retention=RetentionPolicy(a.retention),
        discard=DiscardPolicy(a.discard),
        num_replicas=_set(a.replicas),
        max_msgs=_set(a.max_msgs),
        max_msgs_per_subject=_set(a.max_msgs_per_subject),
        max_bytes=_set(a.max_bytes),
        max_age=_set(a.max_age),
        max_msg_size=_set(a.max_msg_size),
        duplicate_window=_set(a.dupe_window),
        allow_direct=True if a.allow_direct else msgspec.UNSET,
        allow_msg_counter=True if a.allow_counter else msgspec.UNSET,
        allow_msg_schedules=True if a.allow_schedules else msgspec.UNSET,
        allow_msg_ttl=True if a.allow_msg_ttl else msgspec.UNSET,
    )
    try:
        stream = await s.js.create_stream(cfg)
    except StreamNameInUseError:
        raise CliError(
            f"stream {a.stream!r} exists with another config: change it with "
            f"'{a.prog} stream edit {a.stream}' and the options to change, or delete it "
            f"first with '{a.prog} stream rm {a.stream}'"
        ) from None
    if s.out.json:
        s.out.json_doc(stream.cached_info)
    else:
        _stream_view(s, stream.cached_info)
    return 0


#: ``stream edit``'s options: (option's dest, StreamConfig field, label)
_EDITABLE = (
    ("description", "description", "description"),
    ("replicas", "num_replicas", "replicas"),
    ("discard", "discard", "discard"),
    ("max_msgs", "max_msgs", "max messages"),
    ("max_msgs_per_subject", "max_msgs_per_subject", "max per subject"),
    ("max_bytes", "max_bytes", "max bytes"),
    ("max_age", "max_age", "max age"),
    ("max_msg_size", "max_msg_size", "max message size"),
    ("dupe_window", "duplicate_window", "duplicate window"),
    ("allow_direct", "allow_direct", "allow direct"),
    ("allow_counter", "allow_msg_counter", "counters"),
    ("allow_schedules", "allow_msg_schedules", "schedules"),
    ("allow_msg_ttl", "allow_msg_ttl", "message TTLs"),
)


async def cmd_stream_edit(s: Session) -> int:
    """Change the options given of a stream's config, keep the rest (``stream edit``)."""
    a = s.args
    changes: dict[str, Any] = {}
    labels = []
    if a.subjects is not None:
        changes["subjects"] = split_list(a.subjects)
        labels.append("subjects")
    for dest, field, label in _EDITABLE:
        value = getattr(a, dest)
        if value is not None:
            changes[field] = DiscardPolicy(value) if field == "discard" else value
            labels.append(label)
    if not changes:
        raise CliError(
            f"nothing to change: give the options to change (see '{a.prog} stream edit "
            "--help'), e.g. --max-age 1h or --subjects 'orders.>'"
        )
    stream = await s.js.stream(a.stream)
    config = msgspec.structs.replace(stream.cached_info.config, **changes)
    stream = await s.js.update_stream(config)
    if s.out.json:
        s.out.json_doc(stream.cached_info)
    else:
        s.out.info(f"Stream {a.stream}: changed {', '.join(labels)}")
        _stream_view(s, stream.cached_info)
    return 0


async def cmd_stream_rm(s: Session) -> int:
    name = s.args.stream
    await s.js.delete_stream(name)
    if s.out.json:
        s.out.json_doc({"stream": name, "deleted": True})
    else:
        s.out.line(f"Stream {name} deleted")
    return 0


async def cmd_stream_purge(s: Session) -> int:
    a = s.args
    stream = await s.js.stream(a.stream)
    purged = await stream.purge(filter=a.subject, seq=a.seq, keep=a.keep)
    if s.out.json:
        s.out.json_doc({"stream": a.stream, "purged": purged})
    else:
        s.out.line(f"Purged {fmt_num(purged)} messages from stream {a.stream}")
    return 0


async def cmd_stream_get(s: Session) -> int:
    a = s.args
    if (a.seq is None) == (a.last_for is None):
        raise CliError("stream get needs a sequence or --last-for SUBJECT (one of them)")
    stream = await s.js.stream(a.stream)
    if a.last_for is not None:
        m = await stream.get_msg(last_by_subject=a.last_for)
    else:
        m = await stream.get_msg(a.seq)
    print_msg(
        s.out,
        m.seq,
        m.subject,
        m.data,
        m.headers if m.raw_headers else None,
        raw=a.raw,
        title=f"Item: {a.stream}#{m.seq} received {fmt_time(m.time)} on subject {m.subject}",
        extra={"stream": a.stream, "seq": m.seq, "time": m.time},
    )
    return 0


# -- consumers ----------------------------------------------------------------------------


def _filters(cfg: ConsumerConfig) -> str | None:
    """The consumer's filter subjects, or None for a consumer without one (no line, an
    empty cell: nothing is filtered, and no filter is shown)."""
    one = _opt(cfg.filter_subject)
    return ", ".join(_opt(cfg.filter_subjects) or ([one] if one else [])) or None


def _consumer_view(s: Session, info: ConsumerInfo) -> None:
    cfg = info.config
    push = _opt(cfg.deliver_subject)
    s.out.view(
        f"Consumer {info.stream_name} > {info.name} (created {fmt_time(info.created)})",
        [
            (
                "Configuration",
                [
                    ("Durable name", _opt(cfg.durable_name)),
                    ("Type", f"push to {push}" if push else "pull"),
                    ("Filter", _filters(cfg)),
                    ("Deliver policy", cfg.deliver_policy.value),
                    ("Ack policy", cfg.ack_policy.value),
                    ("Ack wait", fmt_duration(_opt(cfg.ack_wait))),
                    ("Replay policy", cfg.replay_policy.value),
                    ("Max deliver", _limit(cfg.max_deliver)),
                    ("Max ack pending", _limit(cfg.max_ack_pending)),
                    ("Description", _opt(cfg.description)),
                ],
            ),
            (
                "State",
                [
                    (
                        "Last delivered",
                        f"consumer seq {info.delivered.consumer_seq}, "
                        f"stream seq {info.delivered.stream_seq}",
                    ),
                    (
                        "Ack floor",
                        f"consumer seq {info.ack_floor.consumer_seq}, "
                        f"stream seq {info.ack_floor.stream_seq}",
                    ),
                    ("Pending", fmt_num(info.num_pending)),
                    ("Ack pending", fmt_num(info.num_ack_pending)),
                    ("Redelivered", fmt_num(info.num_redelivered)),
                    ("Waiting pulls", info.num_waiting),
                ],
            ),
        ],
    )


async def cmd_consumer_ls(s: Session) -> int:
    out = s.out
    stream = await s.js.stream(s.args.stream)
    infos = sorted([i async for i in stream.consumers()], key=lambda i: i.name)
    if out.json:
        out.json_doc(infos)
        return 0
    if not infos:
        out.line(f"No consumers on stream {stream.name}")
        return 0
    rows = [
        (
            i.name,
            "push" if _opt(i.config.deliver_subject) else "pull",
            _filters(i.config),
            i.config.ack_policy.value,
            fmt_num(i.num_pending),
            fmt_num(i.num_ack_pending),
            fmt_num(i.num_redelivered),
            fmt_time(i.delivered.last_active),
        )
        for i in infos
    ]
    cols = ("Name", "Type", "Filter", "Ack", "Pending", "Ack pending", "Redelivered", "Last")
    out.table(f"Consumers of {stream.name} ({len(infos)})", cols, rows, right=(4, 5, 6))
    return 0


async def cmd_consumer_info(s: Session) -> int:
    stream = await s.js.stream(s.args.stream)
    info = await stream.consumer_info(s.args.consumer)
    if s.out.json:
        s.out.json_doc(info)
    else:
        _consumer_view(s, info)
    return 0


async def cmd_consumer_add(s: Session) -> int:
    a = s.args
    if a.pull and a.deliver:
        raise CliError("--pull and --deliver exclude each other (a consumer is pull or push)")
    filters = split_list(a.filter)
    policy = DeliverPolicy(a.deliver_policy)
    if a.start_seq is not None:
        policy = DeliverPolicy.BY_START_SEQUENCE
    cfg = ConsumerConfig(
        durable_name=a.consumer,
        description=_set(a.description),
        ack_policy=AckPolicy(a.ack),
        deliver_policy=policy,
        opt_start_seq=_set(a.start_seq),
        replay_policy=ReplayPolicy(a.replay),
        ack_wait=_set(a.ack_wait),
        max_deliver=_set(a.max_deliver),
        max_ack_pending=_set(a.max_ack_pending),
        deliver_subject=_set(a.deliver),
        deliver_group=_set(a.deliver_group),
    )
    if len(filters) == 1:
        cfg.filter_subject = filters[0]
    elif filters:
        cfg.filter_subjects = filters
    stream = await s.js.stream(a.stream)
    consumer = await stream.create_consumer(cfg)
    if s.out.json:
        s.out.json_doc(consumer.cached_info)
    else:
        _consumer_view(s, consumer.cached_info)
    return 0


async def cmd_consumer_rm(s: Session) -> int:
    a = s.args
    stream = await s.js.stream(a.stream)
    await stream.delete_consumer(a.consumer)
    if s.out.json:
        s.out.json_doc({"stream": a.stream, "consumer": a.consumer, "deleted": True})
    else:
        s.out.line(f"Consumer {a.stream} > {a.consumer} deleted")
    return 0


def _print_js(s: Session, n: int, msg: JsMsg) -> None:
    md = msg.metadata
    title = (
        f"[#{n}] {md.stream}#{md.sequence.stream} (consumer seq {md.sequence.consumer}, "
        f"delivered {md.num_delivered}x, {md.num_pending} pending) on subject {msg.subject}"
    )
    print_msg(
        s.out,
        n,
        msg.subject,
        msg.data,
        msg.headers if msg.raw_headers else None,
        raw=("lines" if s.args.count > 1 else True) if s.args.raw else False,
        title=title,
        extra={
            "stream": md.stream,
            "consumer": md.consumer,
            "seq": md.sequence.stream,
            "consumer_seq": md.sequence.consumer,
            "delivered": md.num_delivered,
            "pending": md.num_pending,
            "time": md.timestamp,
        },
    )


async def cmd_consumer_next(s: Session) -> int:
    a = s.args
    stream = await s.js.stream(a.stream)
    consumer = await stream.consumer(a.consumer)
    if consumer.is_push:
        raise CliError(
            f"consumer {a.stream} > {a.consumer} is a push consumer; next needs a pull consumer"
        )
    ack = not a.no_ack and consumer.cached_info.config.ack_policy is not AckPolicy.NONE
    for n in range(1, a.count + 1):
        msg = await consumer.next(timeout=s.timeout)
        _print_js(s, n, msg)
        if ack:
            await msg.ack_sync(timeout=s.timeout)
            if not s.out.json and not a.raw:
                s.out.info("Acknowledged message")
    return 0
