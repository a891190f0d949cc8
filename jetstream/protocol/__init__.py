"""Sans-IO NATS wire protocol: bytes in, ops out; commands out as bytes. No asyncio, no socket."""
