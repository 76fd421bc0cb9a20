"""Load firsttoken into plain mitmproxy:

    mitmdump -s "$(firsttoken script-path)" --mode reverse:https://api.openai.com \
        --set firsttoken_db=~/firsttoken.db

or with routing done by firsttoken (several upstreams, path prefixes):

    mitmdump -s "$(firsttoken script-path)" --mode reverse:https://api.openai.com \
        --set firsttoken_upstream=openai=https://api.openai.com/v1 \
        --set firsttoken_upstream=anthropic=https://api.anthropic.com
"""

from firsttoken.addon import addons as _factory

addons = _factory()
