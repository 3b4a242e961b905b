"""The receipts' signing key for the ``serve`` processes the tests start on a server database, which
refuses to start without one (an embedded database makes its own): one key per test process."""

from __future__ import annotations

from typing import Final

from service.checkpoints import KEY_ENV
from service.checkpoints.keys import Signer

#: ``serve``'s variable holding the key, to add to a child's environment.
SERVE_KEY: Final = {KEY_ENV: Signer.generate("uno-audit").encode()}
