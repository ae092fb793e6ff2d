"""The authority tier of a web page's domain: which sites are a health agency, the literature, an academic
centre, health media, or a blog, forum or shop, and the host a passage came from.

Domains are matched on their suffix at a label boundary ("pubmed.ncbi.nlm.nih.gov" ends with ".nih.gov"), so
look-alikes such as "nih.gov.example.com" or "cdc-gov.info" never inherit a health agency's authority. The source
-quality priors (`priors`) and the evidence screen (`screening`) both read the tier from here.
"""

from __future__ import annotations

from urllib.parse import urlparse

from clearmed.signatures.records import DomainTier, Passage

# Most specific first where suffixes nest (PubMed sits under nih.gov but is literature, not agency guidance).
DOMAIN_TIERS: dict[DomainTier, tuple[str, ...]] = {
    "literature": (
        "pubmed.ncbi.nlm.nih.gov",
        "ncbi.nlm.nih.gov",
        "europepmc.org",
        "cochranelibrary.com",
        "cochrane.org",
        "nejm.org",
        "thelancet.com",
        "jamanetwork.com",
        "bmj.com",
        "nature.com",
        "sciencedirect.com",
        "springer.com",
        "link.springer.com",
        "wiley.com",
        "onlinelibrary.wiley.com",
        "acpjournals.org",
        "academic.oup.com",
        "ahajournals.org",
        "plos.org",
        "biomedcentral.com",
        "frontiersin.org",
        "mdpi.com",
        "cell.com",
        "annals.org",
        "karger.com",
        "tandfonline.com",
        "journals.lww.com",
    ),
    "government": (
        "nih.gov",
        "cdc.gov",
        "fda.gov",
        "hhs.gov",
        "ahrq.gov",
        "medlineplus.gov",
        "cancer.gov",
        "cms.gov",
        "va.gov",
        "uspreventiveservicestaskforce.org",
        "who.int",
        "paho.org",
        "ecdc.europa.eu",
        "ema.europa.eu",
        "nice.org.uk",
        "nhs.uk",
        "gov.uk",
        "canada.ca",
        "gov.au",
        "health.gov.au",
        "nhmrc.gov.au",
        "sign.ac.uk",
        "idsociety.org",
        "heart.org",
        "acc.org",
        "acog.org",
        "diabetes.org",
        "cancer.org",
        "asco.org",
        "aap.org",
        "escardio.org",
        "gov",
    ),
    "academic": (
        "mayoclinic.org",
        "clevelandclinic.org",
        "hopkinsmedicine.org",
        "massgeneral.org",
        "mskcc.org",
        "mdanderson.org",
        "stanfordhealthcare.org",
        "uptodate.com",
        "merckmanuals.com",
        "msdmanuals.com",
        "statpearls.com",
        "medscape.com",
        "aafp.org",
        "edu",
        "ac.uk",
    ),
    "media": (
        "webmd.com",
        "healthline.com",
        "medicalnewstoday.com",
        "verywellhealth.com",
        "everydayhealth.com",
        "drugs.com",
        "statnews.com",
        "health.com",
        "nytimes.com",
        "bbc.co.uk",
        "bbc.com",
        "reuters.com",
        "theguardian.com",
        "wikipedia.org",
    ),
    "low": (
        "reddit.com",
        "quora.com",
        "medium.com",
        "substack.com",
        "blogspot.com",
        "wordpress.com",
        "tumblr.com",
        "facebook.com",
        "instagram.com",
        "tiktok.com",
        "youtube.com",
        "x.com",
        "twitter.com",
        "pinterest.com",
        "amazon.com",
        "ebay.com",
        "answers.com",
        "patient.info/forums",
    ),
}


def host_of(passage: Passage) -> str | None:
    host = passage.provenance.domain
    if not host and passage.provenance.url:
        url = passage.provenance.url
        host = urlparse(url if "//" in url else f"//{url}").hostname
    if not host:
        return None
    host = host.strip().rstrip(".").lower()
    return host[4:] if host.startswith("www.") else host


def matches_suffix(host: str, suffix: str) -> bool:
    """True when `host` is `suffix` or a subdomain of it (label boundary: "evilnih.gov" is not nih.gov)."""
    return host == suffix or host.endswith("." + suffix)


def domain_tier(host: str | None, url: str | None = None) -> tuple[DomainTier, str | None]:
    """The authority tier of a host and the registered suffix that matched (None when unknown)."""
    if not host:
        return "unknown", None
    path = urlparse(url).path.lower() if url else ""
    for tier, suffixes in DOMAIN_TIERS.items():
        for suffix in suffixes:
            if "/" in suffix:  # a path-scoped entry such as patient.info/forums
                site, _, prefix = suffix.partition("/")
                if matches_suffix(host, site) and path.startswith("/" + prefix):
                    return tier, site
            elif matches_suffix(host, suffix):
                return tier, suffix
    return "unknown", None
