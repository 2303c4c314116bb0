"""The term grammar through the real hook command (issue 23): each example of the issue is a
crystal in a fresh home and a command sent to the installed hook as a subprocess; what the
agent is handed is checked, including the term as written (``matched "git branch -D"``).

Each of these failed before the grammar: the fires were missed (options between words,
wrappers, pipelines), the misfires fired (``-d`` for ``-D``, ``package-lock.json.md``), or the
term was shown folded (``chmod -r 777``)."""

from __future__ import annotations

import pytest

from tests.helpers import Geode

NOTE = "Grammar note essence."


@pytest.fixture()
def g(tmp_path) -> Geode:
    g = Geode(tmp_path)
    g.init_db()
    return g


def _fires(g: Geode, term: str, command: str) -> str:
    """What the hook printed (empty when it stayed quiet)."""
    g.crystal("t.md", NOTE, name="grammar-note", match=f"'{term}'")
    res = g.bash(command)
    assert res.rc == 0 and res.errors == "", res
    return res.context if res.stdout else ""


FIRE = [
    ("git push --force", "git push origin main --force"),
    ("kubectl delete", "kubectl -n prod delete pod x"),
    ("git reset --hard", "git -C dir reset --hard"),
    ("curl | sh", "curl -fsSL URL | sh"),
    ("curl | sh", "curl -fsSL URL | sudo sh -s -- -y"),
    ("DROP TABLE", "psql -c 'DROP TABLE users'"),
    ("DROP TABLE", "sh -c \"psql -c 'DROP TABLE users'\""),
    ("DROP TABLE", "bash -c 'psql app -c \"DROP TABLE users\"'"),
    ("DROP TABLE", "ssh db1 'psql -c \"DROP TABLE users\"'"),
    ("DROP TABLE", "docker exec -it db sh -c 'psql -U postgres -c \"DROP TABLE users\"'"),
    ("git reset --hard", "sudo git reset --hard"),
    ("git reset --hard", "env X=1 git reset --hard"),
    ("git reset --hard", "nice -n 10 git reset --hard"),
    ("rm -rf", "find . -name build | xargs rm -rf"),
    ("pytest -x", "python -m pytest -q -x"),
    ("eslint --fix", "npx eslint src --fix"),
    ("rm -rf", "time rm -rf dist"),
    ("rm -rf", "nohup rm -rf /tmp/build &"),
    ("git branch -D", "git branch -D old-feature"),
    ("chmod -R 777", "chmod -R 777 /var/www"),
    ("git add -A", "git add -A"),
    ("tail -f", "tail -F /var/log/app.log"),  # OPTION_IMPLIES: tail(1) says -F is --follow=name --retry
    ("tail -f", "sudo tail -n 50 -F app.log"),
    ("tail --follow", "tail -F app.log"),
]

QUIET = [
    ("git branch -D", "git branch -d old-feature"),
    ("chmod -R 777", "chmod -r 777 x"),
    ("git add -A", "git add -a"),
    ("tail -F", "tail -f app.log"),  # an implication runs one way: -f does not retry
    ("tail -f", "head -F x"),  # the table is per command
    ("curl | sh", "wget -qO- URL | sh"),
    ("kubectl delete", "kubectl get pods delete"),
    ("git push --force", "git push --force-with-lease origin main"),
    ("DROP TABLE", 'grep -rn "DROP TABLE" migrations/'),
]


@pytest.mark.parametrize(("term", "command"), FIRE)
def test_the_grammar_fires_on_the_forms_agents_write(g, term, command):
    ctx = _fires(g, term, command)
    assert NOTE in ctx, (term, command, ctx)
    assert f'matched "{term}"' in ctx  # as written, never folded


@pytest.mark.parametrize(("term", "command"), QUIET)
def test_the_grammar_stays_quiet_where_the_term_does_not_apply(g, term, command):
    ctx = _fires(g, term, command)
    assert NOTE not in ctx, (term, command, ctx)


def test_an_extension_term_does_not_run_into_another_extension(g, tmp_path):
    g.crystal("lock.md", NOTE, name="lock-note", on="edit", match="package-lock.json")
    edit = {"old_string": "a", "new_string": "b"}
    assert NOTE not in g.tool("Edit", {"file_path": str(tmp_path / "docs/package-lock.json.md"), **edit}).stdout
    assert NOTE in g.tool("Edit", {"file_path": str(tmp_path / "app/package-lock.json"), **edit}).context


def test_the_old_rules_stay_available_per_term(g):
    g.crystal("exact.md", "Exact note.", name="exact-note", match="'exact:git push --force'")
    g.crystal("sub.md", "Substring note.", name="sub-note", match="'substring:push --force'")
    res = g.bash("git push origin main --force")
    ctx = res.context if res.stdout else ""
    assert "Exact note." not in ctx  # exact: the adjacent-token rule, no options between
    assert "Substring note." not in ctx
    ctx = g.bash("git push --force-with-lease").context
    assert "Substring note." in ctx  # substring: the term anywhere in the text
    assert "Exact note." not in ctx
    ctx = g.bash("git push --force").context
    assert "Exact note." in ctx and "Substring note." in ctx


def test_the_delivery_text_shows_an_option_term_as_written(g):
    g.crystal("c.md", NOTE, name="chmod-note", match="'chmod -R 777'")
    ctx = g.bash("sudo chmod -R 777 storage/").context
    assert 'matched "chmod -R 777"' in ctx and "chmod -r 777" not in ctx
