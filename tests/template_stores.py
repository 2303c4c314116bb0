"""Template-heavy stores, written in each tool's own documented syntax (never from geode's notes),
with a hand-counted truth: which pairs are the same subject written twice.

Why generated here and not kept under ``tests/fixtures/``: the fixture glob of the no-harm test
(``tests/test_no_harm.py``) takes every folder there as a store with its own expectations; these
three carry their truth in this module (``TRUTH``), next to the text that makes it true.

- ``runbooks``: a folder of 50 alert runbooks from one template (the Prometheus-operator runbook
  headings: Summary / Impact / Diagnosis / Mitigation, the same boilerplate lines in every one),
  49 distinct alerts over shared services (several alerts per service, so service words are
  shared too), and one alert (``KafkaConsumerLagHigh``) written twice in different words.
- ``mkdocs_api``: an mkdocs site (``mkdocs.yml`` + ``docs/``, the layout mkdocs documents) of API
  reference pages for opposite functions (encode/decode, open/close, ...), each page the same
  Parameters / Returns / Raises / Example sections, admonitions (``!!! note``), and one page
  written twice (``encode`` and an older ``codec-encode``).
- ``cursor_rules``: a folder of per-library Cursor rules (``.mdc``: ``description``, ``globs``,
  ``alwaysApply``, Cursor's documented header) from one template, and one library (Python)
  written twice: a copy of the rule under another name, one line reworded.
"""

from __future__ import annotations

from pathlib import Path

# -- 1. alert runbooks ---------------------------------------------------------------------------
#: (alert, service, what fires it, the command to look, what to do): 49 distinct alerts
ALERTS = [
    (
        "KafkaConsumerLagHigh",
        "orders-consumer",
        "the consumer group lag stays above 10000 messages for 15 minutes",
        "kafka-consumer-groups --describe --group orders",
        "scale the consumer deployment to six replicas",
    ),
    (
        "KafkaConsumerErrors",
        "orders-consumer",
        "the consumer logs more than 50 deserialisation errors a minute",
        "kubectl logs deploy/orders-consumer --since=10m | grep SerializationException",
        "pause the topic and move the poisoned offsets to the dead letter topic",
    ),
    (
        "KafkaBrokerDown",
        "kafka",
        "a broker stops answering the controller for two minutes",
        "kafka-broker-api-versions --bootstrap-server kafka-2:9092",
        "restart the broker pod and watch the ISR shrink back",
    ),
    (
        "KafkaUnderReplicatedPartitions",
        "kafka",
        "partitions report fewer in-sync replicas than configured",
        "kafka-topics --describe --under-replicated-partitions",
        "reassign the partitions away from the slow disk",
    ),
    (
        "PostgresReplicationLag",
        "postgres",
        "the replica replays WAL more than 300 seconds behind the primary",
        "psql -c 'select now() - pg_last_xact_replay_timestamp()'",
        "cancel the long query blocking replay on the replica",
    ),
    (
        "PostgresConnectionsExhausted",
        "postgres",
        "active connections exceed 90 percent of max_connections",
        "psql -c 'select usename, count(*) from pg_stat_activity group by 1'",
        "restart pgbouncer and lower the pool size of the batch jobs",
    ),
    (
        "PostgresDeadlocks",
        "postgres",
        "more than five deadlocks are detected in ten minutes",
        "grep 'deadlock detected' /var/log/postgresql/postgresql-16-main.log",
        "roll back the migration that reorders the invoice locks",
    ),
    (
        "PostgresDiskFull",
        "postgres",
        "the data volume has less than 8 percent free space",
        "df -h /var/lib/postgresql",
        "drop the expired partitions of the audit table",
    ),
    (
        "RedisMemoryHigh",
        "redis",
        "used memory passes 85 percent of maxmemory",
        "redis-cli info memory",
        "flush the session keys older than a week with the cleanup script",
    ),
    (
        "RedisEvictions",
        "redis",
        "the evicted keys counter grows for more than ten minutes",
        "redis-cli info stats | grep evicted_keys",
        "raise maxmemory on the cache tier and check the TTLs of the rate limiter",
    ),
    (
        "RedisReplicaBroken",
        "redis",
        "a replica reports master_link_status down",
        "redis-cli -h redis-replica info replication",
        "resync the replica with a fresh full copy",
    ),
    (
        "NginxHigh5xx",
        "ingress",
        "the ingress returns more than 2 percent 5xx responses",
        "kubectl logs -n ingress deploy/nginx --since=5m | awk '$9 >= 500'",
        "roll back the last upstream release",
    ),
    (
        "NginxCertExpiring",
        "ingress",
        "the TLS certificate expires in less than 14 days",
        "openssl s_client -connect shop.example.com:443 | openssl x509 -noout -enddate",
        "renew the certificate with certbot and reload nginx",
    ),
    (
        "IngressLatencyHigh",
        "ingress",
        "the p99 request latency stays above 2 seconds",
        "kubectl top pods -n ingress",
        "add two ingress replicas and check the upstream keepalive",
    ),
    (
        "NodeDiskPressure",
        "kubernetes",
        "a node reports the DiskPressure condition",
        "kubectl describe node | grep -A5 Conditions",
        "prune unused images with crictl rmi --prune",
    ),
    (
        "NodeNotReady",
        "kubernetes",
        "a node is NotReady for more than five minutes",
        "kubectl get nodes -o wide",
        "cordon and drain the node, then replace it from the node group",
    ),
    (
        "PodCrashLooping",
        "kubernetes",
        "a pod restarts more than five times in ten minutes",
        "kubectl get pods -A | grep CrashLoopBackOff",
        "read the previous container log and revert the bad config map",
    ),
    (
        "KubeJobFailed",
        "kubernetes",
        "a cron job ends with a failed status",
        "kubectl get jobs -A --field-selector status.successful=0",
        "rerun the job by hand after fixing its secret",
    ),
    (
        "HpaMaxedOut",
        "kubernetes",
        "a horizontal pod autoscaler sits at its maximum replicas for an hour",
        "kubectl get hpa -A",
        "raise maxReplicas after checking the cluster has room",
    ),
    (
        "EtcdHighFsyncDuration",
        "etcd",
        "the 99th percentile WAL fsync takes longer than half a second",
        "etcdctl endpoint status --write-out=table",
        "move etcd to the dedicated SSD volume",
    ),
    (
        "EtcdNoLeader",
        "etcd",
        "a member reports no leader",
        "etcdctl endpoint health --cluster",
        "restart the member that lost quorum contact",
    ),
    (
        "CertManagerCertNotReady",
        "cert-manager",
        "a Certificate resource is not Ready for an hour",
        "kubectl describe certificate -A",
        "fix the DNS01 solver credentials",
    ),
    (
        "ElasticsearchClusterRed",
        "elasticsearch",
        "the cluster health turns red",
        "curl -s localhost:9200/_cluster/health?pretty",
        "allocate the unassigned primary shards from the snapshot",
    ),
    (
        "ElasticsearchHeapHigh",
        "elasticsearch",
        "JVM heap use stays above 90 percent",
        "curl -s localhost:9200/_nodes/stats/jvm?pretty",
        "clear the fielddata cache and lower the bulk size",
    ),
    (
        "ElasticsearchDiskWatermark",
        "elasticsearch",
        "a data node passes the high disk watermark",
        "curl -s localhost:9200/_cat/allocation?v",
        "delete the oldest log indices with curator",
    ),
    (
        "RabbitMQQueueBacklog",
        "rabbitmq",
        "the billing queue holds more than 50000 ready messages",
        "rabbitmqctl list_queues name messages_ready consumers",
        "start two more billing workers",
    ),
    (
        "RabbitMQNodeDown",
        "rabbitmq",
        "a cluster node leaves the cluster",
        "rabbitmqctl cluster_status",
        "rejoin the node with rabbitmqctl join_cluster",
    ),
    (
        "CeleryTasksFailing",
        "celery",
        "more than 10 percent of tasks fail in five minutes",
        "celery -A shop inspect active",
        "retry the failed tasks from flower once the broker is back",
    ),
    (
        "CeleryWorkerOffline",
        "celery",
        "no worker answers the ping for three minutes",
        "celery -A shop inspect ping",
        "restart the worker service with systemctl restart celery-shop",
    ),
    (
        "PaymentGatewayTimeouts",
        "payments",
        "calls to the card processor time out more than 20 times a minute",
        "grep 'ReadTimeout' /var/log/payments/api.log | tail -50",
        "switch traffic to the secondary processor",
    ),
    (
        "PaymentWebhookBacklog",
        "payments",
        "unprocessed processor webhooks pile up past 1000",
        "psql payments -c 'select count(*) from webhook_inbox where done = false'",
        "replay the inbox with the webhook worker",
    ),
    (
        "SearchIndexStale",
        "search",
        "the product index is more than an hour behind the catalogue",
        "curl -s search-api/admin/lag",
        "trigger a full reindex from the admin page",
    ),
    (
        "CDNHitRatioLow",
        "cdn",
        "the edge cache hit ratio drops below 70 percent",
        "curl -sI https://static.example.com/app.js | grep -i x-cache",
        "restore the cache-control headers on the asset bucket",
    ),
    (
        "DNSResolutionFailures",
        "coredns",
        "CoreDNS answers SERVFAIL for more than 1 percent of queries",
        "kubectl logs -n kube-system deploy/coredns --since=10m",
        "restart CoreDNS and check the upstream resolvers",
    ),
    (
        "BackupJobMissed",
        "backups",
        "the nightly database backup did not finish by 06:00",
        "restic snapshots --latest 3",
        "run the backup job by hand and check the bucket credentials",
    ),
    (
        "BackupRestoreTestFailed",
        "backups",
        "the weekly restore test cannot start the restored database",
        "restic check --read-data-subset=5%",
        "rebuild the snapshot chain from the last good full backup",
    ),
    ("VaultSealed", "vault", "a Vault node reports sealed", "vault status", "unseal the node with three key holders"),
    (
        "VaultTokenExpiring",
        "vault",
        "the CI token expires in less than three days",
        "vault token lookup -accessor $CI_ACCESSOR",
        "renew the token through the approle",
    ),
    (
        "GrafanaDown",
        "grafana",
        "the Grafana health endpoint fails for five minutes",
        "curl -s grafana.internal/api/health",
        "restart Grafana and check its sqlite file for locks",
    ),
    (
        "PrometheusTargetDown",
        "prometheus",
        "a scrape target is down for ten minutes",
        "curl -s prometheus:9090/api/v1/targets | jq '.data.activeTargets[] | select(.health != \"up\")'",
        "fix the service monitor label selector",
    ),
    (
        "PrometheusRuleEvaluationSlow",
        "prometheus",
        "rule groups take longer than their interval",
        "curl -s prometheus:9090/api/v1/rules | jq '.data.groups[].evaluationTime'",
        "split the heavy recording rules into their own group",
    ),
    (
        "AlertmanagerNotificationsFailing",
        "alertmanager",
        "notifications to the pager fail",
        "amtool check-config /etc/alertmanager/alertmanager.yml",
        "rotate the pager integration key",
    ),
    (
        "S3ReplicationLag",
        "storage",
        "objects wait more than an hour to replicate to the second region",
        "aws s3api get-bucket-replication --bucket shop-assets",
        "requeue the failed objects with batch replication",
    ),
    (
        "NFSMountStale",
        "storage",
        "a worker reports stale NFS file handles",
        "mount | grep nfs && ls /mnt/shared",
        "remount the share with the hard option",
    ),
    (
        "LoginErrorRateHigh",
        "auth",
        "more than 5 percent of logins fail with a server error",
        "kubectl logs deploy/auth --since=10m | grep ' 500 '",
        "roll the auth service back to the previous image",
    ),
    (
        "OAuthProviderDown",
        "auth",
        "the identity provider's token endpoint stops answering",
        "curl -s https://id.example.com/.well-known/openid-configuration",
        "enable the cached-session fallback",
    ),
    (
        "EmailBounceRateHigh",
        "mail",
        "the bounce rate passes 4 percent",
        "grep 'status=bounced' /var/log/mail.log | wc -l",
        "pause the newsletter and clean the list",
    ),
    (
        "SMTPQueueGrowing",
        "mail",
        "the Postfix queue grows past 2000 messages",
        "postqueue -p | tail -1",
        "flush the queue after the relay answers again",
    ),
    (
        "FeatureFlagSyncFailing",
        "flags",
        "the flag service cannot reach its store for ten minutes",
        "curl -s flags.internal/health",
        "restart the flag relay and check the API key",
    ),
]

#: the one alert written twice, in other words: its second writing
DUPLICATE = {
    "file": "orders-consumer-lag.md",
    "title": "Orders consumer lag (Kafka)",
    "alert": "KafkaConsumerLagHigh",
    "service": "orders-consumer",
    "summary": "Raised when lag of the consumer group remains over 10000 messages for 15 minutes.",
    "impact": "Orders placed by customers are confirmed late; the warehouse sees them only after the lag is worked off.",
    "command": "kafka-consumer-groups --describe --group orders",
    "look": "Check the LAG column per partition: one partition far behind the rest points at a stuck consumer.",
    "mitigation": "Scale the consumer deployment up to six replicas, then watch the lag of the consumer group fall.",
}

RUNBOOK = """---
title: {alert}
alert: {alert}
service: {service}
severity: warning
---
# {title}

## Summary

This runbook covers the `{alert}` alert. Follow the steps below in order.
If you are unsure at any step, escalate to the on-call lead in #incidents.

{summary}

{about}

## Impact

{impact}

## Diagnosis

1. Open the service dashboard in Grafana and select the affected environment.
2. Check the recent deploys in the #deploys channel.
3. Run `{command}`.

{look}

## Mitigation

{mitigation}

If the alert does not resolve within 30 minutes, page the owning team.
Record what you did in the incident document.
"""


def _slug(alert: str) -> str:
    out = ""
    for i, ch in enumerate(alert):
        if ch.isupper() and i and (not alert[i - 1].isupper() or (i + 1 < len(alert) and alert[i + 1].islower())):
            out += "-"
        out += ch.lower()
    return out


def _about(service: str) -> str:
    """The paragraph every runbook of one service carries (copied from runbook to runbook, as
    teams do): what makes sibling alerts of one service share their words beyond the template."""
    return (
        f"About {service}: it runs in the production cluster in three replicas behind the internal "
        f"load balancer; its dashboards are in the Grafana folder {service}, its logs in the "
        f"{service} index of Kibana, and its owners answer in #team-{service} during office hours."
    )


def runbook_files() -> dict[str, str]:
    files = {}
    for alert, service, when, command, fix in ALERTS:
        files[f"runbooks/{_slug(alert)}.md"] = RUNBOOK.format(
            about=_about(service),
            alert=alert,
            service=service,
            title=alert,
            summary=f"The alert fires when {when}.",
            impact=f"Users of {service} see errors or delays while {when.split(' ')[1]} is degraded.",
            command=command,
            look=f"Look at the output of `{command.split(' ')[0]}` for the signs described in the summary.",
            mitigation=f"To mitigate, {fix}.",
        )
    d = DUPLICATE
    files[f"runbooks/{d['file']}"] = RUNBOOK.format(
        about=_about(d["service"]),
        alert=d["alert"],
        service=d["service"],
        title=d["title"],
        summary=d["summary"],
        impact=d["impact"],
        command=d["command"],
        look=d["look"],
        mitigation=d["mitigation"],
    )
    files["README.md"] = "# Operations\n\nThe alert runbooks are in the runbooks folder, one per alert.\n"
    assert sum(1 for p in files if p.startswith("runbooks/")) == 50
    return files


# -- 2. an mkdocs API reference site --------------------------------------------------------------
#: (function, signature, what it does, returns, raises, example, its opposite)
FUNCTIONS = [
    (
        "encode",
        'encode(data: str, encoding: str = "utf-8") -> bytes',
        "Encode a string into bytes with the given codec.",
        "`bytes`: the encoded data.",
        "`UnicodeEncodeError`: a character has no encoding in the codec.",
        'codec.encode("h\\u00e9llo")',
        "decode",
    ),
    (
        "decode",
        'decode(data: bytes, encoding: str = "utf-8") -> str',
        "Decode bytes into a string with the given codec.",
        "`str`: the decoded text.",
        "`UnicodeDecodeError`: the bytes are not valid in the codec.",
        "codec.decode(b'h\\xc3\\xa9llo')",
        "encode",
    ),
    (
        "open",
        'open(path: str, mode: str = "r") -> Handle',
        "Open the file at a path and return a handle to it.",
        "`Handle`: the open file.",
        "`FileNotFoundError`: nothing exists at the path.",
        'codec.open("notes.txt")',
        "close",
    ),
    (
        "close",
        "close(handle: Handle) -> None",
        "Close a handle and release the file it holds.",
        "`None`.",
        "`ValueError`: the handle was closed already.",
        "codec.close(handle)",
        "open",
    ),
    (
        "read",
        "read(handle: Handle, size: int = -1) -> bytes",
        "Read up to size bytes from an open handle.",
        "`bytes`: the data read, empty at the end of the file.",
        "`ValueError`: the handle is closed.",
        "codec.read(handle, 1024)",
        "write",
    ),
    (
        "write",
        "write(handle: Handle, data: bytes) -> int",
        "Write bytes to an open handle.",
        "`int`: the number of bytes written.",
        "`ValueError`: the handle is closed.",
        'codec.write(handle, b"abc")',
        "read",
    ),
    (
        "lock",
        "lock(handle: Handle, exclusive: bool = True) -> None",
        "Take an advisory lock on the file of a handle.",
        "`None`.",
        "`BlockingIOError`: another process holds the lock.",
        "codec.lock(handle)",
        "unlock",
    ),
    (
        "unlock",
        "unlock(handle: Handle) -> None",
        "Release the advisory lock held on the file of a handle.",
        "`None`.",
        "`RuntimeError`: the handle holds no lock.",
        "codec.unlock(handle)",
        "lock",
    ),
    (
        "compress",
        "compress(data: bytes, level: int = 6) -> bytes",
        "Compress bytes with deflate at a level.",
        "`bytes`: the compressed data.",
        "`ValueError`: the level is not between 0 and 9.",
        "codec.compress(b'aaaa', 9)",
        "decompress",
    ),
    (
        "decompress",
        "decompress(data: bytes) -> bytes",
        "Decompress deflate data back into bytes.",
        "`bytes`: the original data.",
        "`codec.Error`: the data is not a deflate stream.",
        "codec.decompress(blob)",
        "compress",
    ),
]

API_PAGE = """# {title}

```python
codec.{sig}
```

{what}

{pair}

!!! note
    Every function of this module is thread safe and releases the GIL while it works.

## Parameters

See the signature above; every parameter is positional or keyword.

## Returns

{returns}

## Raises

- {raises}
- `TypeError`: an argument has the wrong type.

## Example

```python
>>> import codec
>>> {example}
```

## See also

- [{other}]({other}.md), the opposite of this function.
- [The module overview](../index.md).
"""

CODEC_ENCODE_OLD = """# codec.encode

```python
codec.encode(data, encoding="utf-8")
```

Turns a string into bytes using the named codec (utf-8 unless another is given).

Text and bytes cross the boundary here: the codec registry is looked up by name, the lookup
is cached for the life of the process, and errors='strict' is the only error handler; a round
trip through both functions returns the original value.

!!! note
    Every function of this module is thread safe and releases the GIL while it works.

## Parameters

See the signature above; every parameter is positional or keyword.

## Returns

`bytes`: the string, encoded.

## Raises

- `UnicodeEncodeError`: the codec cannot encode one of the characters.
- `TypeError`: an argument has the wrong type.

## Example

```python
>>> import codec
>>> codec.encode("h\\u00e9llo")
```

## See also

- [decode](decode.md), the opposite of this function.
- [The module overview](../index.md).
"""

MKDOCS_YML = """site_name: codec
nav:
  - Home: index.md
  - API:
{nav}
markdown_extensions:
  - admonition
"""


#: the paragraph the pages of two opposite functions share, written once for each pair (what
#: makes siblings share words a template does not explain)
PAIRS = {
    ("decode", "encode"): "Text and bytes cross the boundary here: the codec registry is looked up "
    "by name, the lookup is cached for the life of the process, and errors='strict' is the only "
    "error handler; a round trip through both functions returns the original value.",
    ("close", "open"): "A handle owns one operating system file descriptor. Handles are not "
    "inherited by child processes, a handle left open is closed by the garbage collector with a "
    "ResourceWarning, and the with statement closes it for you at the end of the block.",
    ("read", "write"): "Reads and writes go through one buffer of 64 KiB per handle; a write is "
    "visible to a read on the same handle at once, and to other processes after flush or close. "
    "Both move the file position by the number of bytes transferred.",
    ("lock", "unlock"): "Locks are advisory flock locks on the whole file: they bind only "
    "processes that also lock, they are released when the handle closes, and on NFS they may not "
    "be honoured at all.",
    ("compress", "decompress"): "Data is a raw deflate stream with a zlib header and an Adler-32 "
    "checksum, compatible with zlib.compress; the window size is always 15 bits and the "
    "dictionary is never preset.",
}


def _pair(name: str, other: str) -> str:
    return PAIRS[tuple(sorted((name, other)))]


def mkdocs_files() -> dict[str, str]:
    files = {}
    for name, sig, what, returns, raises, example, other in FUNCTIONS:
        files[f"docs/api/{name}.md"] = API_PAGE.format(
            pair=_pair(name, other),
            title=name,
            sig=sig,
            what=what,
            returns=returns,
            raises=raises,
            example=example,
            other=other,
        )
    files["docs/api/codec-encode.md"] = CODEC_ENCODE_OLD
    files["docs/index.md"] = (
        "# codec\n\nA small codec and file library.\n\n"
        + "".join(f"- [{n}](api/{n}.md)\n" for n, *_ in FUNCTIONS)
        + "- [codec.encode (older page)](api/codec-encode.md)\n"
    )
    nav = "".join(f"      - {n}: api/{n}.md\n" for n, *_ in FUNCTIONS) + "      - codec.encode: api/codec-encode.md\n"
    files["mkdocs.yml"] = MKDOCS_YML.format(nav=nav.rstrip("\n"))
    return files


# -- 3. per-library Cursor rules -------------------------------------------------------------------
#: (library, globs, three rules of its own)
LIBRARIES = [
    (
        "react",
        "**/*.tsx",
        [
            "Write function components with hooks, never class components.",
            "Keep state as close as possible to where it is used.",
            "Memoise expensive children with React.memo only after profiling.",
        ],
    ),
    (
        "vue",
        "**/*.vue",
        [
            "Use the Composition API with <script setup>.",
            "Declare props with defineProps and a type.",
            "Keep a component's template under 100 lines.",
        ],
    ),
    (
        "svelte",
        "**/*.svelte",
        [
            "Prefer stores for state shared between components.",
            "Use $: reactive statements sparingly.",
            "Put component styles in the component's own style block.",
        ],
    ),
    (
        "django",
        "**/views.py",
        [
            "Use class-based views for CRUD pages.",
            "Run makemigrations in the same commit as the model change.",
            "Query with select_related for foreign keys shown in lists.",
        ],
    ),
    (
        "flask",
        "**/app.py",
        [
            "Create the app in a factory function.",
            "Register routes on blueprints, one blueprint per area.",
            "Read configuration from environment variables through app.config.",
        ],
    ),
    (
        "fastapi",
        "**/api/*.py",
        [
            "Declare request and response bodies as Pydantic models.",
            "Use Depends for the database session.",
            "Return HTTPException with a detail string for client errors.",
        ],
    ),
    (
        "pytest",
        "tests/**/*.py",
        [
            "Use fixtures instead of setUp methods.",
            "Parametrize cases rather than looping inside a test.",
            "Mark tests that need the network with @pytest.mark.network.",
        ],
    ),
    (
        "jest",
        "**/*.test.ts",
        [
            "Use describe blocks per module and it per behaviour.",
            "Mock modules with jest.mock at the top of the file.",
            "Prefer toEqual over toBe for objects.",
        ],
    ),
    (
        "tailwind",
        "**/*.css",
        [
            "Use utility classes before writing custom CSS.",
            "Extract repeated class lists into components, not @apply.",
            "Keep the theme in tailwind.config.js.",
        ],
    ),
    (
        "prisma",
        "prisma/*.prisma",
        [
            "Name models in singular PascalCase.",
            "Add an index for every foreign key column.",
            "Run prisma migrate dev for every schema change.",
        ],
    ),
    (
        "rust",
        "**/*.rs",
        [
            "Return Result instead of panicking in library code.",
            "Run cargo clippy with -D warnings before committing.",
            "Prefer &str parameters over String.",
        ],
    ),
    (
        "python",
        "**/*.py",
        [
            "Type hints on every public function.",
            "Format with ruff format and lint with ruff check.",
            "Use pathlib for paths, not os.path.",
        ],
    ),
]

RULE = """---
description: {Lib} conventions for this repository
globs: {globs}
alwaysApply: false
---
# {Lib} rules

These rules apply to every {lib} file in the repository. Follow them unless a comment in the
file says otherwise, and mention the exception in the pull request.

{rules}

{family}

When a rule here conflicts with the general style guide, this file wins for {lib} code.
"""

PYTHON_AGAIN = """---
description: Python coding style
globs: **/*.py
alwaysApply: false
---
# Python style rules

These rules apply to every python file in the repository. Follow them unless a comment in the
file says otherwise, and mention the exception in the pull request.

- Type hints on every public function.
- Format with ruff format and lint with ruff check.
- Paths are pathlib objects, never os.path strings.

For all backend code: run the formatter on save, keep modules under 400 lines, write a test
for every bug fix before the fix, and keep backend dependencies pinned in the lock file that
the backend CI job installs from.

When a rule here conflicts with the general style guide, this file wins for python code.
"""


FAMILIES = {
    "frontend": ("react", "vue", "svelte", "jest", "tailwind"),
    "backend": ("django", "flask", "fastapi", "pytest", "prisma", "python"),
}


def _family(lib: str) -> str:
    fam = next((f for f, libs in FAMILIES.items() if lib in libs), "systems")
    return (
        f"For all {fam} code: run the formatter on save, keep modules under 400 lines, write a test "
        f"for every bug fix before the fix, and keep {fam} dependencies pinned in the lock file that "
        f"the {fam} CI job installs from."
    )


def rule_files() -> dict[str, str]:
    files = {}
    for lib, globs, rules in LIBRARIES:
        files[f"{lib}.mdc"] = RULE.format(
            family=_family(lib), Lib=lib.capitalize(), lib=lib, globs=globs, rules="\n".join(f"- {r}" for r in rules)
        )
    files["python-style.mdc"] = PYTHON_AGAIN
    return files


#: each store: (what writes its files, the true duplicate pairs (sorted paths),
#: the published tree (a path inside the store: no new file may appear under it) or "")
STORES = {
    "runbooks": (runbook_files, {("runbooks/kafka-consumer-lag-high.md", "runbooks/orders-consumer-lag.md")}, ""),
    "mkdocs_api": (mkdocs_files, {("docs/api/codec-encode.md", "docs/api/encode.md")}, "docs"),
    "cursor_rules": (rule_files, {("python-style.mdc", "python.mdc")}, ""),
}

#: the template siblings the truth says are NOT duplicates: every other pair in the same folder
TRUTH = {name: pairs for name, (_f, pairs, _p) in STORES.items()}


def write_store(name: str, root: Path) -> Path:
    """Write template store ``name`` under ``root`` (created); returns ``root``."""
    make, _pairs, _published = STORES[name]
    for rel, text in make().items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    return root


def measure(name: str, base: Path) -> dict:
    """Run the Cleaner once on template store ``name`` (written under ``base``) and score its
    near-duplicate findings against ``TRUTH``: ``{found, true_pos, false_pos, missed,
    precision, recall, sibling_pairs}`` (sibling pairs: every other pair of notes in one folder)."""
    from geode.agents.upkeep import run_agent
    from tests.stores import GeodeEnv

    root = write_store(name, base / name)
    settings, engine, _root = GeodeEnv(base, root=root)
    report = run_agent(settings, engine, "measure", "cleaner")
    found = {tuple(sorted((f.path, f.target))) for f in report.findings if f.kind == "near-duplicate"}
    truth = TRUTH[name]
    tp = found & truth
    folders: dict[str, int] = {}
    for p in STORES[name][0]():
        if p.endswith((".md", ".mdc")):
            folders[p.rsplit("/", 1)[0] if "/" in p else ""] = (
                folders.get(p.rsplit("/", 1)[0] if "/" in p else "", 0) + 1
            )
    pairs = sum(n * (n - 1) // 2 for n in folders.values())
    return {
        "found": sorted(found),
        "true_pos": len(tp),
        "false_pos": len(found - truth),
        "missed": len(truth - found),
        "precision": len(tp) / len(found) if found else 1.0,
        "recall": len(tp) / len(truth) if truth else 1.0,
        "sibling_pairs": pairs - len(truth),
        "report": report,
    }


if __name__ == "__main__":  # the measurement docs/UPKEEP.md quotes
    import tempfile

    for store in STORES:
        with tempfile.TemporaryDirectory() as tmp:
            m = measure(store, Path(tmp))
        print(
            f"{store}: duplicates found {len(m['found'])}, true {m['true_pos']}, false {m['false_pos']}, "
            f"missed {m['missed']}; precision {m['precision']:.2f}, recall {m['recall']:.2f}; "
            f"template sibling pairs judged not duplicates: {m['sibling_pairs'] - m['false_pos']} of {m['sibling_pairs']}"
        )
