"""The real-data tasks: which R data set, which target, which columns and rows.

Each :class:`Task` is a declarative record; :func:`neumiss.benchmark.realdata._cache.load_task`
applies it to the exported data set. Every task has real missing values in its
features. Rows with a missing target are dropped, after the row filter.

Choices made to avoid leakage (a feature that is the target in disguise) are
in each task's ``note``.

The suite is split once, before any tuning, into a tuning half and a confirmation
half (each task's ``half``): a change to the defaults is kept only if it helps on
the tuning half and does not lose on the confirmation one. The split is
:func:`split_halves` of the task list, written into each record.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

KINDS = ("regression", "binary")
HALVES = ("tuning", "confirmation")
#: Tasks with at least this many rows are "large", a stratum of the split.
LARGE_ROWS = 4000
#: Seed of the order within a stratum (the number of the issue that asked for the split).
SPLIT_SEED = 43


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
        Row filter: only rows whose column is one of the values are kept (compared as
        text, or as numbers in a numeric column: ``"2"`` keeps 2.0).
    numeric : tuple of str
        Factor columns whose labels are numbers, turned into those numbers.
    note : str
        Why the target, filter and dropped columns are what they are.
    rows : int or None
        Rows after filtering (what :func:`load_task` gives with the package
        versions of the README); the size stratum of the split.
    half : {"tuning", "confirmation"} or None
        The half of the suite the task is in (None: in neither, e.g. a task made
        for a test).
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
    rows: int | None = None
    half: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"task {self.name!r}: kind must be one of {KINDS}, got {self.kind!r}")
        if self.half not in (None, *HALVES):
            raise ValueError(f"task {self.name!r}: half must be one of {HALVES} or None, got "
                             f"{self.half!r}")
        if self.rows is not None and (isinstance(self.rows, bool) or not isinstance(
                self.rows, int) or self.rows < 1):
            raise ValueError(f"task {self.name!r}: rows must be a positive integer or None, "
                             f"got {self.rows!r}")
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


def split_halves(tasks: Iterable[Task], seed: int = SPLIT_SEED) -> dict[str, str]:
    """The tuning / confirmation split of ``tasks``: task name -> half.

    The tasks are put in four strata, in this order: regression with fewer than
    :data:`LARGE_ROWS` rows, regression with more, binary with fewer, binary with
    more. Within a stratum they are ordered by the SHA-256 of ``"{seed}:{name}"``;
    over the strata one after the other, the halves alternate, starting with
    "tuning". Each stratum's halves, and the whole suite's, differ by at most one
    task. Every task needs ``rows``.
    """
    tasks = list(tasks)
    unsized = [task.name for task in tasks if task.rows is None]
    if unsized:
        raise ValueError(f"split_halves: tasks {unsized} have no `rows`")

    def stratum(task: Task) -> tuple[int, bool]:
        return KINDS.index(task.kind), task.rows >= LARGE_ROWS

    def digest(task: Task) -> str:
        return hashlib.sha256(f"{seed}:{task.name}".encode()).hexdigest()

    ordered = sorted(tasks, key=lambda task: (stratum(task), digest(task)))
    return {task.name: HALVES[i % 2] for i, task in enumerate(ordered)}


def select_tasks(names: Sequence[str] | None = None, half: str | None = None) -> list[Task]:
    """The tasks of :data:`TASKS` named in ``names`` (default: all), in that order, duplicates
    dropped, and only those of ``half`` when it is given.

    Raises ``ValueError`` naming the unknown tasks, a half not in :data:`HALVES`, or a
    selection left empty by ``half``.
    """
    names = list(dict.fromkeys(TASKS if names is None else names))
    unknown = [name for name in names if name not in TASKS]
    if unknown:
        raise ValueError(f"unknown tasks {unknown}; tasks: {', '.join(TASKS)}")
    if half is not None and half not in HALVES:
        raise ValueError(f"half must be one of {HALVES}, got {half!r}")
    tasks = [TASKS[name] for name in names if half is None or TASKS[name].half == half]
    if not tasks:
        raise ValueError(f"none of the tasks {names} is in the {half} half")
    return tasks


#: The development suite, by name. Sizes are rows after filtering.
TASKS = {task.name: task for task in (
    Task(
        "titanic", "carData", "TitanicSurvival", "survived", "binary", positive="yes",
        rows=1309, half="tuning",
        note="1309 passengers; age missing for 20%.",
    ),
    Task(
        "gss_vocab", "carData", "GSSvocab", "vocab", "regression",
        rows=27519, half="confirmation",
        note="Vocabulary score (0-10) of 27.5k General Social Survey respondents from year, "
        "gender, birth place, age and education (also as groups).",
    ),
    Task(
        "un_lifeexp", "carData", "UN", "lifeExpF", "regression",
        rows=199, half="confirmation",
        note="Female life expectancy of 199 countries; infant mortality, a different "
        "measure, is a feature (missing for 6).",
    ),
    Task(
        "chile_vote", "carData", "Chile", "vote", "binary", positive="Y",
        keep={"vote": ("Y", "N")},
        rows=1757, half="confirmation",
        note="1757 voters who said Y or N in the 1988 plebiscite poll; abstentions (A), "
        "undecided (U) and missing votes are dropped.",
    ),
    Task(
        "flchain_death", "survival", "flchain", "death", "binary", positive="1",
        drop=("futime", "chapter"),
        rows=7874, half="tuning",
        note="Death during follow-up of 7874 residents; the follow-up time and the cause "
        "of death (chapter) are outcomes, dropped.",
    ),
    Task(
        "mgus2_death", "survival", "mgus2", "death", "binary", positive="1",
        drop=("id", "futime", "ptime", "pstat"),
        rows=1384, half="confirmation",
        note="Death during follow-up of 1384 MGUS patients; follow-up times and "
        "progression (pstat, another outcome) dropped.",
    ),
    Task(
        "fdgs_hgt", "mice", "fdgs", "hgt", "regression",
        drop=("id", "hgt.z", "wgt.z"),
        rows=10007, half="tuning",
        note="Height of 10k Dutch children from region, age, sex and weight; hgt.z is "
        "height standardized by age and sex (leakage), wgt.z is weight's, both dropped.",
    ),
    Task(
        "selfreport_wr", "mice", "selfreport", "wr", "regression",
        drop=("id", "pop", "br", "bm"),
        rows=2060, half="confirmation",
        note="Self-reported weight of 2060 adults; measured height and weight (hm, wm) "
        "are missing by design in the mgg survey, education and ethnicity in the krul one. "
        "BMIs (computed from the target or from hm, wm) and the constant pop are dropped.",
    ),
    Task(
        "tbc_hgt", "mice", "tbc", "hgt.z", "regression",
        drop=("id", "typ", "bmi.z"),
        rows=3098, half="tuning",
        note="Height z-score at 3098 visits of 306 children (rows of one child may fall in "
        "different folds); bmi.z, computed from height and weight, dropped; typ is constant.",
    ),
    Task(
        "house_votes", "mlbench", "HouseVotes84", "Class", "binary", positive="republican",
        rows=435, half="confirmation",
        note="Party of 435 congressmen from 16 votes (y / n, missing when not voting).",
    ),
    Task(
        "breast_cancer", "mlbench", "BreastCancer", "Class", "binary", positive="malignant",
        drop=("Id",),
        numeric=("Cl.thickness", "Cell.size", "Cell.shape", "Marg.adhesion", "Epith.c.size",
                 "Bare.nuclei", "Bl.cromatin", "Normal.nucleoli", "Mitoses"),
        rows=699, half="confirmation",
        note="699 biopsies; the nine 1-10 cytology grades, stored as factors in R, are "
        "used as numbers (as in the original UCI data); bare nuclei missing for 16.",
    ),
    Task(
        "msq_neuroticism", "psychTools", "msq", "Neuroticism", "regression",
        drop=("EA", "TA", "PA", "NegAff", "Extraversion", "Lie", "Sociability", "Impulsivity",
              "MSQ_Round", "ID", "condition", "MSQ_Time", "TOD", "TOD24", "scale", "exper",
              "kindly", "alone", "scornful"),
        rows=3890, half="confirmation",
        note="EPI neuroticism score (a sum over EPI items, not in the data) of 3890 "
        "participants from their 72 mood ratings, several items missing by questionnaire "
        "version. Other scale scores (the mood scales are sums of the features, the other "
        "EPI scales share the questionnaire), study identifiers and times, and 3 items "
        "missing for nearly everyone are dropped.",
    ),
    Task(
        "credit_default", "modeldata", "credit_data", "Status", "binary", positive="bad",
        rows=4454, half="confirmation",
        note="Default (bad) of 4454 credit applicants from the application: seniority, home, "
        "loan time, age, marital status, records, job, expenses, income (missing for 381), "
        "assets, debt, amount and price. Every column is known when the credit is granted: "
        "nothing dropped. Chosen because boosting beats the linear models on it.",
    ),
    Task(
        "txhousing_sales", "ggplot2", "txhousing", "sales", "regression",
        drop=("volume", "inventory", "date"),
        rows=8034, half="confirmation",
        note="Monthly home sales of 46 Texas cities, 2000-2015 (8034 months with sales "
        "known), from the city, year, month, median price and active listings (missing for "
        "17%). volume (the total value of the month's sales) and inventory (listings over "
        "the recent monthly sales) are computed from the target, dropped; date is year + "
        "month again. Sales scale with the city and move with the season and the housing "
        "cycle in each city: trees fit what a linear model cannot.",
    ),
    Task(
        "growth_dj", "AER", "GrowthDJ", "gdpgrowth", "regression", drop=("gdp85",),
        rows=117, half="tuning",
        note="Growth of GDP per working-age person 1960-1985 of 117 countries (Durlauf and "
        "Johnson) from the 1960 GDP, population growth, investment and schooling shares, "
        "1960 literacy (missing for 18) and the sample indicators (oil, intermediate, OECD). "
        "The 1985 GDP, with the 1960 one, gives the target: dropped. Small and heavy-tailed "
        "(GDP levels): the linear models fail on some folds.",
    ),
    Task(
        "seatbelt_fatalities", "AER", "USSeatBelts", "fatalities", "regression",
        rows=765, half="tuning",
        note="Traffic fatalities per million miles of 50 US states and DC, 1983-1997 (765 "
        "state-years), from state, year, miles driven, seat belt usage (not surveyed in "
        "209 state-years), speed limits, drinking age, alcohol law, income, age and "
        "enforcement. Nothing dropped: no column is computed from fatalities.",
    ),
    Task(
        "slid_wages", "carData", "SLID", "wages", "regression",
        rows=4147, half="tuning",
        note="Hourly wages of the 4147 Ontario respondents (1994 Survey of Labour and Income "
        "Dynamics) with a wage, from education (missing for 3%), age, sex and language "
        "(missing for 1%). Nothing dropped.",
    ),
    Task(
        "spi_age", "psychTools", "spi", "age", "regression",
        rows=4000, half="confirmation",
        note="Age of 4000 SAPA respondents from the 135 personality items and the "
        "demographics (sex, health, parents' and own education, wellness, exercise, smoking, "
        "emergency-room visits), which are missing for 1-28% of them (skipped questions); "
        "the items are complete. Nothing dropped: no column is computed from age.",
    ),
    Task(
        "gapminder_lifeexp", "dslabs", "gapminder", "life_expectancy", "regression",
        rows=10545, half="tuning",
        note="Life expectancy of 185 countries x 57 years (1960-2016, 10545 country-years) "
        "from country (185 levels), year, continent, region, infant mortality (missing for "
        "14%), fertility, population and GDP (missing for 28%, mostly early years and poor "
        "countries). Infant mortality is a different measure, kept; nothing dropped. Rows of "
        "one country fall in different folds.",
    ),
    Task(
        "star_read3", "AER", "STAR", "read3", "regression", drop=("math3",),
        rows=6000, half="tuning",
        note="Third-grade reading score of the 6000 Tennessee STAR pupils who took it, from "
        "gender, ethnicity, birth quarter, and per grade (K-3) the class type, reading and "
        "math scores of the earlier grades, lunch status, school, teacher's degree, ladder, "
        "experience and ethnicity, school system and id (80 levels). Earlier grades are "
        "missing for pupils who joined the study later (MNAR-looking). The third-grade math "
        "score, taken with the target, is dropped.",
    ),
    Task(
        "polls_clinton", "dslabs", "polls_us_election_2016", "rawpoll_clinton", "regression",
        drop=("adjpoll_clinton", "adjpoll_trump", "adjpoll_johnson", "adjpoll_mcmullin"),
        rows=4208, half="confirmation",
        note="Clinton's share in 4208 polls of the 2016 US election from state (57 levels), "
        "dates (days since 1970), pollster (196 levels), its grade (missing for 10%), sample "
        "size, population, and the raw shares of Trump, Johnson (missing for 33%) and "
        "McMullin (polled in few states: missing for 99%). The adjusted shares are "
        "FiveThirtyEight's corrections of the raw ones, the target's included: dropped.",
    ),
    Task(
        "nafld_death", "survival", "nafld1", "status", "binary", positive="1",
        drop=("id", "case.id", "futime"),
        rows=17549, half="tuning",
        note="Death during follow-up of 17549 Olmsted County residents (NAFLD cases and "
        "matched controls) from age, sex, weight (missing for 27%), height (18%) and BMI "
        "(28%). The follow-up time is an outcome and the ids (of the subject and of the "
        "case matched) are identifiers: dropped.",
    ),
    Task(
        "pima_diabetes", "mlbench", "PimaIndiansDiabetes2", "diabetes", "binary", positive="pos",
        rows=768, half="tuning",
        note="Diabetes of 768 Pima women from 8 clinical measurements; the zeros of the "
        "original data, impossible values, are NA here: insulin missing for 49%, triceps for "
        "30%. Nothing dropped.",
    ),
    Task(
        "colic_lived", "VIM", "colic", "outcome", "binary", positive="lived",
        drop=("hospitalID", "surgical_lesion", "lesion_type1", "lesion_type2", "lesion_type3",
              "cp_data", "temp_extreme_ordered", "temp_extreme_num"),
        rows=299, half="confirmation",
        note="Survival (lived, against died or euthanized) of 299 horses with colic from the "
        "admission examination; 98% of the rows have a missing value. Dropped: the hospital "
        "id, whether the lesion was surgical and its type (decided at surgery or autopsy, "
        "retrospectively), whether pathology data exist (after the outcome), and two copies "
        "of temp_extreme. age is adult or missing (missing = young in the source: kept as "
        "such).",
    ),
    Task(
        "pbc_death", "survival", "pbc", "status", "binary", positive="2",
        drop=("id", "time"),
        rows=418, half="tuning",
        note="Death (status 2; censored 0 and transplant 1 are class 0) of 418 Mayo Clinic "
        "PBC patients from treatment, age, sex and lab values; the 106 patients outside the "
        "randomized trial miss treatment and most lab values (MNAR-looking). The follow-up "
        "time and the id are dropped.",
    ),
    Task(
        "lung_death", "survival", "lung", "status", "binary", positive="2",
        drop=("inst", "time"),
        rows=228, half="confirmation",
        note="Death (status 2) during follow-up of 228 advanced lung cancer patients from "
        "age, sex, performance scores and weight loss (meal calories missing for 21%). The "
        "follow-up time and the institution code (an identifier) are dropped.",
    ),
    Task(
        "colon_death", "survival", "colon", "status", "binary", positive="1",
        keep={"etype": ("2",)}, drop=("id", "study", "time", "etype"),
        rows=929, half="tuning",
        note="Death of 929 colon cancer trial patients (the rows of the death event, etype 2; "
        "those of recurrence are another outcome) from treatment, sex, age, tumour features "
        "and nodes (missing for 2%, differentiation for 2%). Follow-up time, ids and the "
        "constant study and etype are dropped.",
    ),
    Task(
        "bfi_female", "psychTools", "bfi", "gender", "binary", positive="2",
        rows=2800, half="confirmation",
        note="Gender (2 = female) of 2800 SAPA respondents from 25 Big Five items (each "
        "missing for 0.3-1.3%), education (missing for 8%) and age. Nothing dropped.",
    ),
    Task(
        "survey_male", "MASS", "survey", "Sex", "binary", positive="Male",
        rows=236, half="tuning",
        note="Sex of 236 Adelaide statistics students from hand spans, writing hand, arm "
        "folding, pulse (missing for 19%), clapping hand, exercise, smoking, height (missing "
        "for 12%), its unit and age. Nothing dropped.",
    ),
    Task(
        "soybean_phytophthora", "mlbench", "Soybean", "Class", "binary",
        positive="phytophthora-rot",
        rows=683, half="tuning",
        note="Phytophthora rot (88 of 683 plants) against the 18 other diseases from 35 "
        "categorical observations. The class is the one with the most incomplete rows (68 "
        "of 88); four other classes are incomplete too, and every other class complete, "
        "so the missingness pattern carries information (MNAR-looking). Nothing dropped.",
    ),
    Task(
        "brandsma_lpo", "mice", "brandsma", "lpo", "regression", drop=("sch", "pup", "apo"),
        rows=3902, half="tuning",
        note="Language post-test of 3902 Dutch pupils from IQ, sex, SES (missing for 3%), "
        "minority status, repeated group, language and arithmetic pre-tests (8% missing), "
        "school denomination and school SES index (15% missing). The arithmetic post-test "
        "(another outcome) and the school and pupil ids are dropped.",
    ),
    Task(
        "boys_wgt", "mice", "boys", "wgt", "regression", drop=("bmi",),
        rows=744, half="tuning",
        note="Weight of 744 Dutch boys aged 0-21 from age, height, head circumference, "
        "genital and pubic hair stages and testicular volume (the puberty measures missing "
        "for 67-70%, mostly the young boys: MNAR-looking) and region. BMI, computed from "
        "weight, is dropped.",
    ),
    Task(
        "ozone_max", "mlbench", "Ozone", "V4", "regression", numeric=("V1", "V2"),
        rows=361, half="tuning",
        note="Daily maximum one-hour ozone at Upland, CA in 1976 (361 days) from month and "
        "day (as numbers), weekday and 9 weather measurements (inversion base temperature "
        "missing for 38%). Nothing dropped.",
    ),
    Task(
        "tao_airtemp", "VIM", "tao", "Air.Temp", "regression",
        rows=655, half="confirmation",
        note="Air temperature of 655 TAO buoy readings (1993 and 1997) from year, position, "
        "sea surface temperature, humidity (missing for 14%, sensor outages) and winds. "
        "Nothing dropped.",
    ),
    Task(
        "pulp_kappa", "VIM", "pulplignin", "Y.Kappa", "regression", drop=("Observation",),
        rows=301, half="confirmation",
        note="Kappa number of the pulp at 301 hours of a continuous digester from 21 process "
        "measurements; two lab measurements (AAWhiteSt.4, SulphidityL.4) are taken every "
        "other hour (missing for 47%). The observation time stamp, an identifier, is "
        "dropped.",
    ),
)}
