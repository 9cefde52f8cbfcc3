"""The durable mailbox: admission of a peer message, per-target delivery, and what a session already holds.

Modules: :mod:`.framing` (what the target sees: framed content, source, id),
:mod:`.send` (admission into the Lead log), :mod:`.dispatch` (per-target FIFO
delivery, acknowledgement, recovery), :mod:`.message_index` (what a session's
own log holds), :mod:`.holdings` (whether a live or sleeping session durably
holds a message, and waiting until it does), :mod:`.receipts` (read receipts).
"""

from dsh_team.mail.dispatch import Dispatcher
from dsh_team.mail.framing import MESSAGE_ID_PREFIX, TEAM_MESSAGE_SOURCE, framed_content, team_source, team_user_message
from dsh_team.mail.holdings import SessionMessages
from dsh_team.mail.message_index import MessageIndex, fold_messages
from dsh_team.mail.receipts import ReadReceipts, scan_receipts
from dsh_team.mail.send import MessageSender, SendResult

__all__ = [
    "Dispatcher",
    "MESSAGE_ID_PREFIX",
    "TEAM_MESSAGE_SOURCE",
    "framed_content",
    "team_source",
    "team_user_message",
    "MessageIndex",
    "SessionMessages",
    "fold_messages",
    "ReadReceipts",
    "scan_receipts",
    "MessageSender",
    "SendResult",
]
