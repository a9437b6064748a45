"""The ledger's hot-path SQL, as text: opening a ledger and recording calls imports no
SQLAlchemy. Generated from tables.py by ``python -m expediter.core.ledger.compile``; do
not edit (``tests/core/ledger/test_statements.py`` fails when it is out of date).
"""

# fmt: off

#: The schema revision these statements were rendered for (the newest migration).
REVISION = '0006_oauth_tokens'
#: The PostgreSQL channel ``Ledger.wait`` listens on; the payload is a call's key.
CHANNEL = 'expediter_calls'
#: The columns of ``tool_call_attempts``, in table order.
COLUMNS = (
    'key', 'call_id', 'name', 'message_id', 'run_id', 'user_id', 'owner_id',
    'instance_id', 'tool', 'action', 'arguments', 'decision', 'decided_by',
    'status', 'result', 'error', 'attempted_at', 'updated_at', 'finished_at',
    'duration_ms', 'lease_expires_at', 'worker_id', 'attempt_id', 'late',
    'request', 'decision_reason', 'duplicate_of', 'delegated_from',
)
#: sqlite: statement name -> (SQL, positional parameter names).
SQLITE: dict[str, tuple[str, tuple[str, ...]]] = {
    'insert': (
        'INSERT INTO tool_call_attempts ("key", call_id, name, message_id, run_id, '
        'user_id, owner_id, instance_id, tool, action, arguments, decision, decided_by, '
        'status, result, error, attempted_at, updated_at, finished_at, duration_ms, '
        'lease_expires_at, worker_id, attempt_id, request, decision_reason, '
        'delegated_from) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '
        '?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT ("key") DO NOTHING',
        (
            'key', 'call_id', 'name', 'message_id', 'run_id', 'user_id', 'owner_id',
            'instance_id', 'tool', 'action', 'arguments', 'decision', 'decided_by',
            'status', 'result', 'error', 'attempted_at', 'updated_at', 'finished_at',
            'duration_ms', 'lease_expires_at', 'worker_id', 'attempt_id', 'request',
            'decision_reason', 'delegated_from',
        ),
    ),
    'insert_duplicate': (
        'INSERT INTO tool_call_attempts ("key", call_id, name, message_id, run_id, '
        'user_id, owner_id, instance_id, tool, action, arguments, decision, decided_by, '
        'status, result, error, attempted_at, updated_at, finished_at, duration_ms, '
        'lease_expires_at, worker_id, attempt_id, request, decision_reason, '
        'duplicate_of, delegated_from) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '
        '?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT ("key") DO NOTHING',
        (
            'key', 'call_id', 'name', 'message_id', 'run_id', 'user_id', 'owner_id',
            'instance_id', 'tool', 'action', 'arguments', 'decision', 'decided_by',
            'status', 'result', 'error', 'attempted_at', 'updated_at', 'finished_at',
            'duration_ms', 'lease_expires_at', 'worker_id', 'attempt_id', 'request',
            'decision_reason', 'duplicate_of', 'delegated_from',
        ),
    ),
    'upsert': (
        'INSERT INTO tool_call_attempts ("key", call_id, name, message_id, run_id, '
        'user_id, owner_id, instance_id, tool, action, arguments, decision, decided_by, '
        'status, result, error, attempted_at, updated_at, finished_at, duration_ms, '
        'lease_expires_at, worker_id, attempt_id, request, decision_reason, '
        'delegated_from) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '
        '?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT ("key") DO UPDATE SET status = '
        'excluded.status, result = excluded.result, error = excluded.error, updated_at = '
        'excluded.updated_at, finished_at = excluded.finished_at, duration_ms = '
        'excluded.duration_ms, lease_expires_at = excluded.lease_expires_at, late = CASE '
        "WHEN (tool_call_attempts.status = 'abandoned') THEN 1 ELSE "
        'tool_call_attempts.late END WHERE tool_call_attempts.attempt_id = '
        "excluded.attempt_id AND (tool_call_attempts.status = 'proposed' OR "
        "tool_call_attempts.status = 'approved' OR tool_call_attempts.status = "
        "'abandoned')",
        (
            'key', 'call_id', 'name', 'message_id', 'run_id', 'user_id', 'owner_id',
            'instance_id', 'tool', 'action', 'arguments', 'decision', 'decided_by',
            'status', 'result', 'error', 'attempted_at', 'updated_at', 'finished_at',
            'duration_ms', 'lease_expires_at', 'worker_id', 'attempt_id', 'request',
            'decision_reason', 'delegated_from',
        ),
    ),
    'finish': (
        'UPDATE tool_call_attempts SET status=?, result=?, error=?, updated_at=?, '
        'finished_at=?, duration_ms=?, lease_expires_at=NULL, late=? WHERE '
        'tool_call_attempts."key" = ? AND tool_call_attempts.status = ? AND '
        'tool_call_attempts.user_id IS ? AND tool_call_attempts.attempt_id = ?',
        (
            'status', 'result', 'error', 'updated_at', 'finished_at', 'duration_ms',
            'late', 'g_key', 'g_status', 'g_user', 'g_attempt',
        ),
    ),
    'finish_notify': (
        'UPDATE tool_call_attempts SET status=?, result=?, error=?, updated_at=?, '
        'finished_at=?, duration_ms=?, lease_expires_at=NULL, late=? WHERE '
        'tool_call_attempts."key" = ? AND tool_call_attempts.status = ? AND '
        'tool_call_attempts.user_id IS ? AND tool_call_attempts.attempt_id = ?',
        (
            'status', 'result', 'error', 'updated_at', 'finished_at', 'duration_ms',
            'late', 'g_key', 'g_status', 'g_user', 'g_attempt',
        ),
    ),
    'decide': (
        'UPDATE tool_call_attempts SET decision=?, decided_by=?, status=?, error=?, '
        'updated_at=?, finished_at=?, lease_expires_at=?, worker_id=?, attempt_id=?, '
        'decision_reason=? WHERE tool_call_attempts."key" = ? AND '
        'tool_call_attempts.status = ? AND tool_call_attempts.user_id IS ?',
        (
            'decision', 'decided_by', 'status', 'error', 'updated_at', 'finished_at',
            'lease_expires_at', 'worker_id', 'attempt_id', 'decision_reason', 'g_key',
            'g_status', 'g_user',
        ),
    ),
    'decide_notify': (
        'UPDATE tool_call_attempts SET decision=?, decided_by=?, status=?, error=?, '
        'updated_at=?, finished_at=?, lease_expires_at=?, worker_id=?, attempt_id=?, '
        'decision_reason=? WHERE tool_call_attempts."key" = ? AND '
        'tool_call_attempts.status = ? AND tool_call_attempts.user_id IS ?',
        (
            'decision', 'decided_by', 'status', 'error', 'updated_at', 'finished_at',
            'lease_expires_at', 'worker_id', 'attempt_id', 'decision_reason', 'g_key',
            'g_status', 'g_user',
        ),
    ),
    'renew': (
        'UPDATE tool_call_attempts SET lease_expires_at=? WHERE tool_call_attempts."key" '
        '= ? AND tool_call_attempts.status = ? AND tool_call_attempts.user_id IS ? AND '
        'tool_call_attempts.attempt_id = ?',
        (
            'lease_expires_at', 'g_key', 'g_status', 'g_user', 'g_attempt',
        ),
    ),
    'confirm': (
        "UPDATE tool_call_attempts SET status='confirmed', updated_at=? WHERE "
        "tool_call_attempts.message_id = ? AND tool_call_attempts.status = 'executed'",
        (
            'updated_at', 'message_id',
        ),
    ),
    'sweep': (
        "UPDATE tool_call_attempts SET status='abandoned', error='abandoned: the worker "
        "stopped renewing its lease', updated_at=?, finished_at=? WHERE "
        "(tool_call_attempts.status = 'proposed' OR tool_call_attempts.status = "
        '\'approved\') AND tool_call_attempts.lease_expires_at < ? RETURNING "key"',
        (
            'now', 'now', 'now',
        ),
    ),
    'expire_approvals': (
        "UPDATE tool_call_attempts SET status='abandoned', error='abandoned: nobody "
        "decided before the approval expired', updated_at=?, finished_at=? WHERE "
        "tool_call_attempts.status = 'awaiting_approval' AND "
        'tool_call_attempts.updated_at < ? RETURNING "key"',
        (
            'now', 'now', 'before',
        ),
    ),
    'get': (
        'SELECT tool_call_attempts."key", tool_call_attempts.call_id, '
        'tool_call_attempts.name, tool_call_attempts.message_id, '
        'tool_call_attempts.run_id, tool_call_attempts.user_id, '
        'tool_call_attempts.owner_id, tool_call_attempts.instance_id, '
        'tool_call_attempts.tool, tool_call_attempts.action, '
        'tool_call_attempts.arguments, tool_call_attempts.decision, '
        'tool_call_attempts.decided_by, tool_call_attempts.status, '
        'tool_call_attempts.result, tool_call_attempts.error, '
        'tool_call_attempts.attempted_at, tool_call_attempts.updated_at, '
        'tool_call_attempts.finished_at, tool_call_attempts.duration_ms, '
        'tool_call_attempts.lease_expires_at, tool_call_attempts.worker_id, '
        'tool_call_attempts.attempt_id, tool_call_attempts.late, '
        'tool_call_attempts.request, tool_call_attempts.decision_reason, '
        'tool_call_attempts.duplicate_of, tool_call_attempts.delegated_from \nFROM '
        'tool_call_attempts \nWHERE tool_call_attempts."key" = ?',
        (
            'key',
        ),
    ),
}
#: postgresql: statement name -> (SQL, positional parameter names).
POSTGRESQL: dict[str, tuple[str, tuple[str, ...]]] = {
    'insert': (
        'INSERT INTO tool_call_attempts (key, call_id, name, message_id, run_id, '
        'user_id, owner_id, instance_id, tool, action, arguments, decision, decided_by, '
        'status, result, error, attempted_at, updated_at, finished_at, duration_ms, '
        'lease_expires_at, worker_id, attempt_id, request, decision_reason, '
        'delegated_from) VALUES (%s::VARCHAR, %s::VARCHAR, %s::VARCHAR, %s::VARCHAR, '
        '%s::VARCHAR, %s::VARCHAR, %s::VARCHAR, %s::VARCHAR, %s::VARCHAR, %s::VARCHAR, '
        '%s::JSONB, %s::VARCHAR, %s::VARCHAR, %s::VARCHAR, %s::JSONB, %s::VARCHAR, %s, '
        '%s, %s, %s, %s, %s::VARCHAR, %s::VARCHAR, %s::JSONB, %s::VARCHAR, %s::VARCHAR) '
        'ON CONFLICT (key) DO NOTHING',
        (
            'key', 'call_id', 'name', 'message_id', 'run_id', 'user_id', 'owner_id',
            'instance_id', 'tool', 'action', 'arguments', 'decision', 'decided_by',
            'status', 'result', 'error', 'attempted_at', 'updated_at', 'finished_at',
            'duration_ms', 'lease_expires_at', 'worker_id', 'attempt_id', 'request',
            'decision_reason', 'delegated_from',
        ),
    ),
    'insert_duplicate': (
        'INSERT INTO tool_call_attempts (key, call_id, name, message_id, run_id, '
        'user_id, owner_id, instance_id, tool, action, arguments, decision, decided_by, '
        'status, result, error, attempted_at, updated_at, finished_at, duration_ms, '
        'lease_expires_at, worker_id, attempt_id, request, decision_reason, '
        'duplicate_of, delegated_from) VALUES (%s::VARCHAR, %s::VARCHAR, %s::VARCHAR, '
        '%s::VARCHAR, %s::VARCHAR, %s::VARCHAR, %s::VARCHAR, %s::VARCHAR, %s::VARCHAR, '
        '%s::VARCHAR, %s::JSONB, %s::VARCHAR, %s::VARCHAR, %s::VARCHAR, %s::JSONB, '
        '%s::VARCHAR, %s, %s, %s, %s, %s, %s::VARCHAR, %s::VARCHAR, %s::JSONB, '
        '%s::VARCHAR, %s::VARCHAR, %s::VARCHAR) ON CONFLICT (key) DO NOTHING',
        (
            'key', 'call_id', 'name', 'message_id', 'run_id', 'user_id', 'owner_id',
            'instance_id', 'tool', 'action', 'arguments', 'decision', 'decided_by',
            'status', 'result', 'error', 'attempted_at', 'updated_at', 'finished_at',
            'duration_ms', 'lease_expires_at', 'worker_id', 'attempt_id', 'request',
            'decision_reason', 'duplicate_of', 'delegated_from',
        ),
    ),
    'upsert': (
        'INSERT INTO tool_call_attempts (key, call_id, name, message_id, run_id, '
        'user_id, owner_id, instance_id, tool, action, arguments, decision, decided_by, '
        'status, result, error, attempted_at, updated_at, finished_at, duration_ms, '
        'lease_expires_at, worker_id, attempt_id, request, decision_reason, '
        'delegated_from) VALUES (%s::VARCHAR, %s::VARCHAR, %s::VARCHAR, %s::VARCHAR, '
        '%s::VARCHAR, %s::VARCHAR, %s::VARCHAR, %s::VARCHAR, %s::VARCHAR, %s::VARCHAR, '
        '%s::JSONB, %s::VARCHAR, %s::VARCHAR, %s::VARCHAR, %s::JSONB, %s::VARCHAR, %s, '
        '%s, %s, %s, %s, %s::VARCHAR, %s::VARCHAR, %s::JSONB, %s::VARCHAR, %s::VARCHAR) '
        'ON CONFLICT (key) DO UPDATE SET status = excluded.status, result = '
        'excluded.result, error = excluded.error, updated_at = excluded.updated_at, '
        'finished_at = excluded.finished_at, duration_ms = excluded.duration_ms, '
        'lease_expires_at = excluded.lease_expires_at, late = CASE WHEN '
        "(tool_call_attempts.status = 'abandoned') THEN true ELSE "
        'tool_call_attempts.late END WHERE tool_call_attempts.attempt_id = '
        "excluded.attempt_id AND (tool_call_attempts.status = 'proposed' OR "
        "tool_call_attempts.status = 'approved' OR tool_call_attempts.status = "
        "'abandoned')",
        (
            'key', 'call_id', 'name', 'message_id', 'run_id', 'user_id', 'owner_id',
            'instance_id', 'tool', 'action', 'arguments', 'decision', 'decided_by',
            'status', 'result', 'error', 'attempted_at', 'updated_at', 'finished_at',
            'duration_ms', 'lease_expires_at', 'worker_id', 'attempt_id', 'request',
            'decision_reason', 'delegated_from',
        ),
    ),
    'finish': (
        'UPDATE tool_call_attempts SET status=%s::VARCHAR, result=%s::JSONB, '
        'error=%s::VARCHAR, updated_at=%s, finished_at=%s, duration_ms=%s, '
        'lease_expires_at=NULL, late=%s WHERE tool_call_attempts.key = %s::VARCHAR AND '
        'tool_call_attempts.status = %s::VARCHAR AND tool_call_attempts.user_id IS NOT '
        'DISTINCT FROM %s::VARCHAR AND tool_call_attempts.attempt_id = %s::VARCHAR',
        (
            'status', 'result', 'error', 'updated_at', 'finished_at', 'duration_ms',
            'late', 'g_key', 'g_status', 'g_user', 'g_attempt',
        ),
    ),
    'finish_notify': (
        'WITH changed AS \n(UPDATE tool_call_attempts SET status=%s::VARCHAR, '
        'result=%s::JSONB, error=%s::VARCHAR, updated_at=%s, finished_at=%s, '
        'duration_ms=%s, lease_expires_at=NULL, late=%s WHERE tool_call_attempts.key = '
        '%s::VARCHAR AND tool_call_attempts.status = %s::VARCHAR AND '
        'tool_call_attempts.user_id IS NOT DISTINCT FROM %s::VARCHAR AND '
        'tool_call_attempts.attempt_id = %s::VARCHAR RETURNING tool_call_attempts.key)\n '
        "SELECT pg_notify('expediter_calls', changed.key) AS pg_notify_1 \nFROM changed",
        (
            'status', 'result', 'error', 'updated_at', 'finished_at', 'duration_ms',
            'late', 'g_key', 'g_status', 'g_user', 'g_attempt',
        ),
    ),
    'decide': (
        'UPDATE tool_call_attempts SET decision=%s::VARCHAR, decided_by=%s::VARCHAR, '
        'status=%s::VARCHAR, error=%s::VARCHAR, updated_at=%s, finished_at=%s, '
        'lease_expires_at=%s, worker_id=%s::VARCHAR, attempt_id=%s::VARCHAR, '
        'decision_reason=%s::VARCHAR WHERE tool_call_attempts.key = %s::VARCHAR AND '
        'tool_call_attempts.status = %s::VARCHAR AND tool_call_attempts.user_id IS NOT '
        'DISTINCT FROM %s::VARCHAR',
        (
            'decision', 'decided_by', 'status', 'error', 'updated_at', 'finished_at',
            'lease_expires_at', 'worker_id', 'attempt_id', 'decision_reason', 'g_key',
            'g_status', 'g_user',
        ),
    ),
    'decide_notify': (
        'WITH changed AS \n(UPDATE tool_call_attempts SET decision=%s::VARCHAR, '
        'decided_by=%s::VARCHAR, status=%s::VARCHAR, error=%s::VARCHAR, updated_at=%s, '
        'finished_at=%s, lease_expires_at=%s, worker_id=%s::VARCHAR, '
        'attempt_id=%s::VARCHAR, decision_reason=%s::VARCHAR WHERE '
        'tool_call_attempts.key = %s::VARCHAR AND tool_call_attempts.status = '
        '%s::VARCHAR AND tool_call_attempts.user_id IS NOT DISTINCT FROM %s::VARCHAR '
        "RETURNING tool_call_attempts.key)\n SELECT pg_notify('expediter_calls', "
        'changed.key) AS pg_notify_1 \nFROM changed',
        (
            'decision', 'decided_by', 'status', 'error', 'updated_at', 'finished_at',
            'lease_expires_at', 'worker_id', 'attempt_id', 'decision_reason', 'g_key',
            'g_status', 'g_user',
        ),
    ),
    'renew': (
        'UPDATE tool_call_attempts SET lease_expires_at=%s WHERE tool_call_attempts.key '
        '= %s::VARCHAR AND tool_call_attempts.status = %s::VARCHAR AND '
        'tool_call_attempts.user_id IS NOT DISTINCT FROM %s::VARCHAR AND '
        'tool_call_attempts.attempt_id = %s::VARCHAR',
        (
            'lease_expires_at', 'g_key', 'g_status', 'g_user', 'g_attempt',
        ),
    ),
    'confirm': (
        "UPDATE tool_call_attempts SET status='confirmed', updated_at=%s WHERE "
        'tool_call_attempts.message_id = %s::VARCHAR AND tool_call_attempts.status = '
        "'executed'",
        (
            'updated_at', 'message_id',
        ),
    ),
    'sweep': (
        "WITH changed AS \n(UPDATE tool_call_attempts SET status='abandoned', "
        "error='abandoned: the worker stopped renewing its lease', updated_at=%s, "
        'finished_at=%s WHERE tool_call_attempts.key IN (SELECT tool_call_attempts.key '
        "\nFROM tool_call_attempts \nWHERE (tool_call_attempts.status = 'proposed' OR "
        "tool_call_attempts.status = 'approved') AND tool_call_attempts.lease_expires_at "
        '< %s \n LIMIT %s FOR UPDATE SKIP LOCKED) RETURNING tool_call_attempts.key)\n '
        "SELECT changed.key, pg_notify('expediter_calls', changed.key) AS pg_notify_1 "
        '\nFROM changed',
        (
            'now', 'now', 'now', 'batch',
        ),
    ),
    'expire_approvals': (
        "WITH changed AS \n(UPDATE tool_call_attempts SET status='abandoned', "
        "error='abandoned: nobody decided before the approval expired', updated_at=%s, "
        "finished_at=%s WHERE tool_call_attempts.status = 'awaiting_approval' AND "
        'tool_call_attempts.updated_at < %s RETURNING tool_call_attempts.key)\n SELECT '
        "changed.key, pg_notify('expediter_calls', changed.key) AS pg_notify_1 \nFROM "
        'changed',
        (
            'now', 'now', 'before',
        ),
    ),
    'get': (
        'SELECT tool_call_attempts.key, tool_call_attempts.call_id, '
        'tool_call_attempts.name, tool_call_attempts.message_id, '
        'tool_call_attempts.run_id, tool_call_attempts.user_id, '
        'tool_call_attempts.owner_id, tool_call_attempts.instance_id, '
        'tool_call_attempts.tool, tool_call_attempts.action, '
        'tool_call_attempts.arguments, tool_call_attempts.decision, '
        'tool_call_attempts.decided_by, tool_call_attempts.status, '
        'tool_call_attempts.result, tool_call_attempts.error, '
        'tool_call_attempts.attempted_at, tool_call_attempts.updated_at, '
        'tool_call_attempts.finished_at, tool_call_attempts.duration_ms, '
        'tool_call_attempts.lease_expires_at, tool_call_attempts.worker_id, '
        'tool_call_attempts.attempt_id, tool_call_attempts.late, '
        'tool_call_attempts.request, tool_call_attempts.decision_reason, '
        'tool_call_attempts.duplicate_of, tool_call_attempts.delegated_from \nFROM '
        'tool_call_attempts \nWHERE tool_call_attempts.key = %s::VARCHAR',
        (
            'key',
        ),
    ),
}
