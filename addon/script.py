"""Load firsttoken into plain mitmproxy:

    mitmdump -s "$(firsttoken script-path)" --mode reverse:https://api.openai.com \
        --set firsttoken_db=~/firsttoken.db

or with routing done by firsttoken (several upstreams, path prefixes):

    mitmdump -s "$(firsttoken script-path)" --mode reverse:https://api.openai.com \
        --set firsttoken_upstream=openai=https://api.openai.com/v1 \
        --set firsttoken_upstream=anthropic=https://api.anthropic.com
"""

from firsttoken.addon.capture import Capture
from firsttoken.addon.metrics import MetricsAddon
from firsttoken.addon.otel import OtelAddon

capture = Capture()
metrics = MetricsAddon(capture)
addons = [capture, metrics, OtelAddon(capture, metrics.metrics)]
