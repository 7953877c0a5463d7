"""The real-data tasks: which R data set, which target, which columns and rows.

Each :class:`Task` is a declarative record; :func:`neumiss.benchmark.realdata._cache.load_task`
applies it to the exported data set. Every task has real missing values in its
features. Rows with a missing target are dropped, after the row filter.

Choices made to avoid leakage (a feature that is the target in disguise) are
in each task's ``note``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

KINDS = ("regression", "binary")


@dataclass(frozen=True)
class Task:
    """One prediction task on one data set of an R package.

    Attributes
    ----------
    name : str
        Command-line name (``--tasks``) and ``task`` column of ``runs.csv``.
    package, dataset : str
        The R package and its data set (``package::dataset``), exported to
        ``PACKAGE.DATASET.csv`` and ``.json`` in the cache.
    target : str
        The column predicted.
    kind : {"regression", "binary"}
    positive : str or None
        Binary tasks: the target value counted as class 1 (a factor label, or
        a number written as text for a numeric 0/1 column); every other value is 0.
    drop : tuple of str
        Columns removed from the features (identifiers, leakage, constants).
    keep : mapping str -> tuple of str
        Row filter: only rows whose column (as text) is one of the values are kept.
    numeric : tuple of str
        Factor columns whose labels are numbers, turned into those numbers.
    note : str
        Why the target, filter and dropped columns are what they are.
    """

    name: str
    package: str
    dataset: str
    target: str
    kind: str
    positive: str | None = None
    drop: tuple[str, ...] = ()
    keep: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    numeric: tuple[str, ...] = ()
    note: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"task {self.name!r}: kind must be one of {KINDS}, got {self.kind!r}")
        if (self.kind == "binary") != (self.positive is not None):
            raise ValueError(f"task {self.name!r}: give `positive` for binary tasks only")
        overlap = {self.target} & (set(self.drop) | set(self.numeric))
        if overlap:
            raise ValueError(f"task {self.name!r}: the target {self.target!r} is also dropped "
                             "or converted")

    @property
    def source(self) -> str:
        """``package::dataset``, as the R exporter takes it."""
        return f"{self.package}::{self.dataset}"


#: The development suite, by name. Sizes are rows after filtering.
TASKS = {task.name: task for task in (
    Task(
        "titanic", "carData", "TitanicSurvival", "survived", "binary", positive="yes",
        note="1309 passengers; age missing for 20%.",
    ),
    Task(
        "gss_vocab", "carData", "GSSvocab", "vocab", "regression",
        note="Vocabulary score (0-10) of 27.5k General Social Survey respondents from year, "
        "gender, birth place, age and education (also as groups).",
    ),
    Task(
        "un_lifeexp", "carData", "UN", "lifeExpF", "regression",
        note="Female life expectancy of 199 countries; infant mortality, a different "
        "measure, is a feature (missing for 6).",
    ),
    Task(
        "chile_vote", "carData", "Chile", "vote", "binary", positive="Y",
        keep={"vote": ("Y", "N")},
        note="1757 voters who said Y or N in the 1988 plebiscite poll; abstentions (A), "
        "undecided (U) and missing votes are dropped.",
    ),
    Task(
        "flchain_death", "survival", "flchain", "death", "binary", positive="1",
        drop=("futime", "chapter"),
        note="Death during follow-up of 7874 residents; the follow-up time and the cause "
        "of death (chapter) are outcomes, dropped.",
    ),
    Task(
        "mgus2_death", "survival", "mgus2", "death", "binary", positive="1",
        drop=("id", "futime", "ptime", "pstat"),
        note="Death during follow-up of 1384 MGUS patients; follow-up times and "
        "progression (pstat, another outcome) dropped.",
    ),
    Task(
        "fdgs_hgt", "mice", "fdgs", "hgt", "regression",
        drop=("id", "hgt.z", "wgt.z"),
        note="Height of 10k Dutch children from region, age, sex and weight; hgt.z is "
        "height standardized by age and sex (leakage), wgt.z is weight's, both dropped.",
    ),
    Task(
        "selfreport_wr", "mice", "selfreport", "wr", "regression",
        drop=("id", "pop", "br", "bm"),
        note="Self-reported weight of 2060 adults; measured height and weight (hm, wm) "
        "are missing by design in the mgg survey, education and ethnicity in the krul one. "
        "BMIs (computed from the target or from hm, wm) and the constant pop are dropped.",
    ),
    Task(
        "tbc_hgt", "mice", "tbc", "hgt.z", "regression",
        drop=("id", "typ", "bmi.z"),
        note="Height z-score at 3098 visits of 306 children (rows of one child may fall in "
        "different folds); bmi.z, computed from height and weight, dropped; typ is constant.",
    ),
    Task(
        "house_votes", "mlbench", "HouseVotes84", "Class", "binary", positive="republican",
        note="Party of 435 congressmen from 16 votes (y / n, missing when not voting).",
    ),
    Task(
        "breast_cancer", "mlbench", "BreastCancer", "Class", "binary", positive="malignant",
        drop=("Id",),
        numeric=("Cl.thickness", "Cell.size", "Cell.shape", "Marg.adhesion", "Epith.c.size",
                 "Bare.nuclei", "Bl.cromatin", "Normal.nucleoli", "Mitoses"),
        note="699 biopsies; the nine 1-10 cytology grades, stored as factors in R, are "
        "used as numbers (as in the original UCI data); bare nuclei missing for 16.",
    ),
    Task(
        "msq_neuroticism", "psychTools", "msq", "Neuroticism", "regression",
        drop=("EA", "TA", "PA", "NegAff", "Extraversion", "Lie", "Sociability", "Impulsivity",
              "MSQ_Round", "ID", "condition", "MSQ_Time", "TOD", "TOD24", "scale", "exper",
              "kindly", "alone", "scornful"),
        note="EPI neuroticism score (a sum over EPI items, not in the data) of 3890 "
        "participants from their 72 mood ratings, several items missing by questionnaire "
        "version. Other scale scores (the mood scales are sums of the features, the other "
        "EPI scales share the questionnaire), study identifiers and times, and 3 items "
        "missing for nearly everyone are dropped.",
    ),
    Task(
        "credit_default", "modeldata", "credit_data", "Status", "binary", positive="bad",
        note="Default (bad) of 4454 credit applicants from the application: seniority, home, "
        "loan time, age, marital status, records, job, expenses, income (missing for 381), "
        "assets, debt, amount and price. Every column is known when the credit is granted: "
        "nothing dropped. Chosen because boosting beats the linear models on it.",
    ),
    Task(
        "txhousing_sales", "ggplot2", "txhousing", "sales", "regression",
        drop=("volume", "inventory", "date"),
        note="Monthly home sales of 46 Texas cities, 2000-2015 (8034 months with sales "
        "known), from the city, year, month, median price and active listings (missing for "
        "17%). volume (the total value of the month's sales) and inventory (listings over "
        "the recent monthly sales) are computed from the target, dropped; date is year + "
        "month again. Sales scale with the city and move with the season and the housing "
        "cycle in each city: trees fit what a linear model cannot.",
    ),
    Task(
        "growth_dj", "AER", "GrowthDJ", "gdpgrowth", "regression", drop=("gdp85",),
        note="Growth of GDP per working-age person 1960-1985 of 117 countries (Durlauf and "
        "Johnson) from the 1960 GDP, population growth, investment and schooling shares, "
        "1960 literacy (missing for 18) and the sample indicators (oil, intermediate, OECD). "
        "The 1985 GDP, with the 1960 one, gives the target: dropped. Small and heavy-tailed "
        "(GDP levels): the linear models fail on some folds.",
    ),
    Task(
        "seatbelt_fatalities", "AER", "USSeatBelts", "fatalities", "regression",
        note="Traffic fatalities per million miles of 50 US states and DC, 1983-1997 (765 "
        "state-years), from state, year, miles driven, seat belt usage (not surveyed in "
        "209 state-years), speed limits, drinking age, alcohol law, income, age and "
        "enforcement. Nothing dropped: no column is computed from fatalities.",
    ),
)}
