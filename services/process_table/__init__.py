"""The process table service: the global program table in PostgreSQL, fed by call completions.

Run: `python -m services.process_table` (NATS_URL, DATABASE_URL, see `settings.py`); schema:
`alembic -c migrations/alembic.ini upgrade head`, run by the deploy step (`autellix up`, compose's
`migrate` job) before the service starts: the service never imports `migrations/`.

    main.py        wiring: engine, bus, service, signals
    handlers.py    the service on the bus: session requests, the completion apply loop, promotions
    puller.py      streaming durable pull consumer of call-completed events (JetStream)
    apply.py       fast path (cached programs, one statement) or general path per batch
    repository.py  the completion SQL (set-based, JSON row documents, optimistic version checks)
    fold.py        pure: completions folded into program rows with the core's ProgramLedger
    sessions.py    open / close / look up / expire / promote
    models.py      SQLAlchemy models of tenants, programs, threads, calls
    views.py, wire.py   what the table hands out, and its mapping to wire messages
    settings.py, db.py, transact.py, expiry.py   settings, engine, retried transactions, idle sweeper
    loadtest.py    the measurement behind `autellix bench process-table`
"""
