"""``geode doctor``'s look at the warm search server's socket: one this user cannot trust (a
directory or socket of another user, a peer running as someone else) is never sent a prompt,
and the hook then falls back to full text without a word; doctor is where that is said.

Returns ``(ok, examined, message)``, or None when no server has ever placed a socket for this
home (nothing to check)."""

from __future__ import annotations

import os


def serve_socket_check(home: str) -> tuple[bool, dict, str] | None:
    """The socket the hook and ``geode search`` would ask passes the client's checks."""
    from geode.delivery import recall_socket

    rd = recall_socket.run_dir(home)
    if not os.path.lexists(rd):
        return None
    why = recall_socket.untrusted_reason(home)
    sock = recall_socket.socket_path(home)
    if why:
        return (
            False,
            {"socket": sock},
            f"the warm search socket is not trusted and not used (prompts get full-text recall only): {why}",
        )
    return True, {"socket": sock}, f"the warm search socket {sock} is private to this user (or absent)"
