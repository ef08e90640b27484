"""A hand-written corpus of voice-assistant replies, each annotated with its hazard spans.

A *hazard span* is a stretch of text that must reach the TTS engine in one piece: a cut
inside ``3.14``, ``Dr. Patel`` or ``support@example.com`` makes the voice pause or
mispronounce. Spans are written as substrings and located in the reply (every
occurrence counts). An abbreviation in mid-sentence includes the word after it, since
the dangerous cut is the one *after* its period (``Dr.| Patel``); one that really ends
a sentence (``…and so on, etc.``) is not a hazard there.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Reply:
    """One assistant reply, its category, and the substrings no chunk cut may fall inside."""

    tag: str
    text: str
    hazards: tuple[str, ...] = ()

    def hazard_spans(self) -> list[tuple[int, int]]:
        """Every ``(start, end)`` occurrence of every hazard substring in ``text``."""
        spans: list[tuple[int, int]] = []
        for hazard in self.hazards:
            start = self.text.find(hazard)
            if start < 0:
                raise ValueError(f"hazard {hazard!r} not found in reply {self.text[:40]!r}")
            while start >= 0:
                spans.append((start, start + len(hazard)))
                start = self.text.find(hazard, start + 1)
        return sorted(spans)


def _r(tag: str, text: str, *hazards: str) -> Reply:
    return Reply(tag, text, hazards)


REPLIES: tuple[Reply, ...] = (
    # --- short interjection first -------------------------------------------------
    _r("interjection", "Sure! I've set a timer for ten minutes, starting now."),
    _r("interjection", "Great question. Octopuses have three hearts and blue blood."),
    _r(
        "interjection",
        "Hmm, let me think. If you leave at eight you should make the 9:15 train "
        "with a few minutes to spare.",
        "9:15",
    ),
    _r("interjection", "Okay. I've added milk, eggs and bread to your shopping list."),
    _r(
        "interjection",
        "Oh no, I'm sorry to hear that. Would you like me to cancel the rest of today's reminders?",
    ),
    _r("interjection", "Yes! The Giants won, 5 to 3, in extra innings last night."),
    _r(
        "interjection",
        "Of course. Your next meeting is at 2:30 p.m. with Dr. Okafor.",
        "2:30 p.m. with",
        "Dr. Okafor",
    ),
    _r(
        "interjection",
        "Absolutely, happy to help. What city should I check the weather for?",
    ),
    _r("interjection", "No problem at all! Playing your focus playlist now."),
    _r(
        "interjection",
        "Got it. I'll remind you to call Mom at 6 p.m. tomorrow.",
        "6 p.m. tomorrow",
    ),
    _r(
        "interjection",
        "Well, that depends. A soft-boiled egg takes about six minutes, and a "
        "hard-boiled one closer to ten.",
    ),
    _r("interjection", "Right, so the short answer is no. The store closes at 9 tonight."),
    # --- long first sentence, no early punctuation -----------------------------------
    _r(
        "long-opening",
        "The main reason your sourdough is coming out dense and gummy in the middle is "
        "probably that the starter was not quite active enough when you mixed the dough. "
        "Try feeding it twice the day before.",
    ),
    _r(
        "long-opening",
        "If you want to get to the airport before the evening rush starts building up on "
        "the highway you should leave the house no later than half past three. I can set "
        "a reminder.",
    ),
    _r(
        "long-opening",
        "According to the forecast I just pulled up for your area there is a strong chance "
        "of thunderstorms moving in late this afternoon and lasting well into the evening.",
    ),
    _r(
        "long-opening",
        "What most people do not realize about compound interest is that the earliest "
        "years matter far more than the later ones because every dollar has more time to "
        "grow.",
    ),
    _r(
        "long-opening",
        "One thing you could try when the baby will not settle in the evening is a warm "
        "bath followed by a quiet feed in a dim room with some gentle white noise in the "
        "background.",
    ),
    _r(
        "long-opening",
        "Your package from the hardware store was picked up by the courier this morning "
        "and is currently on its way to the local depot for delivery tomorrow.",
    ),
    _r(
        "long-opening",
        "The best way to remove a red wine stain from a cotton tablecloth is to blot it "
        "gently and then soak it in cold water with a little dish soap.",
    ),
    _r(
        "long-opening",
        "Scientists now think that the first flowering plants appeared somewhere around "
        "130 million years ago during the early part of the Cretaceous period.",
    ),
    # --- numbers, times, prices, abbreviations at the start ---------------------------
    _r(
        "abbrev",
        "Dr. Patel said the test results look normal. She wants to see you again in six months.",
        "Dr. Patel",
    ),
    _r(
        "time",
        "At 10 a.m. the library opens its doors, and the children's story hour starts half "
        "an hour later.",
        "10 a.m. the",
    ),
    _r(
        "price",
        "$3.50 is the cheapest fare for that route. A day pass costs $12.00 and covers "
        "every bus in the city.",
        "$3.50",
        "$12.00",
    ),
    _r(
        "decimal",
        "3.14 is only an approximation of pi. The digits go on forever without repeating.",
        "3.14",
    ),
    _r(
        "abbrev",
        "e.g. you could say remind me at noon, or play jazz in the kitchen.",
        "e.g. you",
    ),
    _r(
        "abbrev",
        "Mr. and Mrs. Alvarez accepted your invitation. They'll arrive around seven.",
        "Mr. and",
        "Mrs. Alvarez",
    ),
    _r(
        "number",
        "1,250 steps is all you've walked today. That's about a quarter of your usual goal.",
        "1,250",
    ),
    _r(
        "abbrev",
        "The U.S. Postal Service delivers on Saturdays, but not on Sundays or federal holidays.",
        "U.S. Postal",
    ),
    _r(
        "time",
        "By 7:45 tomorrow morning the temperature should already be around 18.5 degrees.",
        "7:45",
        "18.5",
    ),
    _r(
        "version",
        "Version 2.4.1 fixes the Bluetooth bug. You can update from the settings menu, "
        "i.e. the gear icon.",
        "2.4.1",
        "i.e. the",
    ),
    _r(
        "price",
        "The laptop is $1,299.99 at the moment, which is $200 less than last week.",
        "$1,299.99",
    ),
    _r(
        "initials",
        "J. R. R. Tolkien finished The Lord of the Rings in 1949, though it was published "
        "in parts starting in 1954.",
        "J. R. R. Tolkien",
    ),
    _r(
        "abbrev",
        "St. Louis is about four hours away by car. Traffic looks light right now.",
        "St. Louis",
    ),
    _r(
        "number",
        "0.5 milligrams is the usual starting dose, but please check with your pharmacist first.",
        "0.5",
    ),
    _r(
        "abbrev",
        "Prof. Nakamura's lecture moved to Room 204. It still starts at 3 p.m. sharp.",
        "Prof. Nakamura",
        "3 p.m. sharp",
    ),
    _r(
        "number",
        "No. 7 is the bus you want. It stops right outside the museum.",
        "No. 7",
    ),
    _r(
        "abbrev",
        "Bring the basics, i.e. water, sunscreen, a hat, etc. and you'll be fine for the hike.",
        "i.e. water",
        "etc. and",
    ),
    _r(
        "number",
        "98.6 degrees Fahrenheit is the classic figure for normal body temperature, which "
        "is 37 degrees Celsius.",
        "98.6",
    ),
    _r(
        "abbrev",
        "Your flight with United leaves at 6:05 a.m. on Friday. Gate info comes out the day "
        "before.",
        "6:05 a.m. on",
    ),
    _r(
        "mixed",
        "Approx. 3.2 million people live there. It's the second-largest city in the country.",
        "Approx. 3.2",
    ),
    # --- lists ------------------------------------------------------------------------
    _r(
        "list",
        "Here's the recipe:\n1. Preheat the oven to 180 degrees.\n2. Whisk the eggs and "
        "sugar.\n3. Fold in the flour and bake for 25 minutes.",
        "1. Preheat",
        "2. Whisk",
        "3. Fold",
    ),
    _r(
        "list",
        "You have three things on today's list: pick up the dry cleaning, renew the car "
        "insurance, and water the plants.",
    ),
    _r(
        "list",
        "Sure, here are some options:\n- Thai Basil, 0.4 miles away\n- Luigi's, rated 4.7\n"
        "- The Green Fork, open until 11",
        "0.4",
        "4.7",
    ),
    _r(
        "list",
        "First, unplug the router. Second, wait thirty seconds. Third, plug it back in and "
        "give it two minutes.",
    ),
    _r(
        "list",
        "The steps are simple.\n1. Open the app.\n2. Tap Settings.\n3. Choose Reset.",
        "1. Open",
        "2. Tap",
        "3. Choose",
    ),
    # --- markdown ---------------------------------------------------------------------
    _r(
        "markdown",
        "**Heads up:** your card ending in 4412 expires next month. You can update it in the app.",
    ),
    _r(
        "markdown",
        "The **quickest** route is the ring road, about 22 minutes with current traffic.",
    ),
    _r(
        "markdown",
        "You can read the full guide [on our help page](https://help.example.com/setup) "
        "whenever you like.",
        "https://help.example.com/setup",
    ),
    _r(
        "markdown",
        "Two things to remember:\n- **Passport**, valid for at least 6 months\n- "
        "**Adapter**, type G for the U.K. trip",
        "U.K. trip",
    ),
    # --- quotes -----------------------------------------------------------------------
    _r(
        "quote",
        '"The only way out is through," as Robert Frost wrote. It fits your week pretty well.',
    ),
    _r(
        "quote",
        'She said, "Call me when you land." Do you want me to set a reminder for that?',
    ),
    _r(
        "quote",
        "\u201cBe right back\u201d was the last message from Sam, sent at 4:12 p.m. yesterday.",
        "4:12 p.m. yesterday",
    ),
    _r(
        "quote",
        "The sign literally says 'No parking, Mon. to Fri.' so you're fine on the weekend.",
        "Mon. to",
        "Fri.' so",
    ),
    # --- CJK --------------------------------------------------------------------------
    # Full-width punctuation is the point of these replies.
    _r("cjk", "好的！明天早上七点叫你起床。"),  # noqa: RUF001
    _r("cjk", "东京今天晴，最高气温是23.5度，适合出门散步。", "23.5"),  # noqa: RUF001
    _r("cjk", "かしこまりました。会議は午後3時からです。資料も送っておきますね。"),
    _r("cjk", "네, 알겠습니다. 내일 오전 9시에 알림을 설정했어요."),
    # --- URLs and e-mails -------------------------------------------------------------
    _r(
        "url",
        "You can track it at https://track.example.com/pkg/88231. It should arrive Thursday.",
        "https://track.example.com/pkg/88231",
    ),
    _r(
        "email",
        "Send the form to support@example.com and they'll reply within two business days.",
        "support@example.com",
    ),
    _r(
        "url",
        "The docs live at www.example.org/docs/v3.2/install, under the section called "
        "Getting Started.",
        "www.example.org/docs/v3.2/install",
    ),
    _r(
        "email",
        "I found two addresses: anna.lee@work.example and anna@home.example. Which one "
        "should I use?",
        "anna.lee@work.example",
        "anna@home.example",
    ),
    # --- inline numbered lists -------------------------------------------------------
    _r(
        "inline-list",
        "To reset it: 1. Hold the power button. 2. Wait for the light. 3. Let go.",
        "1. Hold",
        "2. Wait",
        "3. Let",
    ),
    _r(
        "inline-list",
        "Easy. 1. Open the lid, 2. pour in the water and 3. press start.",
        "1. Open",
        "2. pour",
        "3. press",
    ),
    _r(
        "inline-list",
        "Sure! Your list: 1. Milk 2. Eggs 3. Bread from the corner shop.",
        "1. Milk",
        "2. Eggs",
        "3. Bread",
    ),
    # --- inline code ------------------------------------------------------------------
    _r(
        "inline-code",
        "Type `git commit | -m` followed by your message, then push.",
        "git commit | -m",
    ),
    _r(
        "inline-code",
        "Sure, run `make test; make lint` first. It checks everything.",
        "make test; make lint",
    ),
    _r(
        "inline-code",
        "In the terminal type `cd ~/Music. ls -la` and press enter.",
        "cd ~/Music. ls -la",
    ),
    # --- quotes that a sentence goes on after -----------------------------------------
    _r(
        "quote",
        "\u201cIs it raining?\u201d he wondered, looking at the grey sky.",
        "raining?\u201d he",
    ),
    _r(
        "quote",
        "'Why not?' she asked, and nobody had an answer for her.",
        "not?' she",
    ),
    _r(
        "quote",
        'Okay. "Stop!" the guard shouted, so everyone stood still.',
        'Stop!" the',
    ),
    _r(
        "quote",
        "\u201eRegnet es?\u201c fragte er. \u00bbNein!\u00ab rief sie.",
        "es?\u201c fragte",
        "Nein!\u00ab rief",
    ),
    _r(
        "quote",
        "D'accord. \u00ab Il pleut ? \u00bb demanda-t-il en regardant le ciel.",
        "? \u00bb demanda",
    ),
    # --- numerals with a period before a lowercase word -------------------------------
    _r(
        "ordinal",
        "At the roundabout take the 3. exit and keep left for a mile.",
        "3. exit",
    ),
    # --- other languages --------------------------------------------------------------
    _r(
        "de",
        "Die Ausstellung läuft noch bis zum 12. März, d. h. du hast drei Wochen.",
        "12. März",
        "d. h. du",
    ),
    _r(
        "de",
        "Gerne. Wir brauchen u. a. Mehl, Zucker, Eier usw. und das Rezept Nr. 4 aus dem Buch.",
        "u. a. Mehl",
        "usw. und",
        "Nr. 4",
    ),
    _r(
        "de",
        "Am 3. Oktober ist Feiertag, z. B. sind die Geschäfte dann geschlossen.",
        "3. Oktober",
        "z. B. sind",
    ),
    _r(
        "fr",
        "Le rendez-vous est le 1er mars avec M. Dupont, p. ex. \u00e0 10 h.",
        "M. Dupont",
        "p. ex. \u00e0",
    ),
    _r(
        "es",
        "Claro. La Sra. Gómez llega el 5 de mayo, aprox. a las nueve.",
        "Sra. Gómez",
        "aprox. a",
    ),
    _r(
        "it",
        "Certo, il Dott. Rossi riceve il lunedì, ecc. e il giovedì.",
        "Dott. Rossi",
        "ecc. e",
    ),
    _r(
        "nl",
        "Dat kan, bijv. met de trein of met dhr. Jansen, d.w.z. met de auto.",
        "bijv. met",
        "dhr. Jansen",
        "d.w.z. met",
    ),
    _r(
        "pt",
        "Claro, o Sr. Silva chega no dia 2, i. e. na segunda-feira.",
        "Sr. Silva",
        "i. e. na",
    ),
    # --- everyday mixed -------------------------------------------------------------------
    _r(
        "mixed",
        "It's 72 degrees and sunny right now. Later it'll cool down to about 60, so maybe "
        "bring a light jacket.",
    ),
    _r(
        "mixed",
        "Your account balance is $2,431.18. The last payment, $89.99 to the phone company, "
        "cleared this morning.",
        "$2,431.18",
        "$89.99",
    ),
    _r(
        "mixed",
        "That recipe serves four. To make it for six, multiply everything by 1.5, e.g. 300 "
        "grams of pasta instead of 200.",
        "1.5",
        "e.g. 300",
    ),
    _r(
        "mixed",
        "Wait, did you mean Paris, France, or Paris, Texas? There's a 7-hour time "
        "difference between them.",
    ),
    _r(
        "mixed",
        "Sorry, I couldn't find a contact called Jen. Did you mean Jenny Walsh or Jennifer "
        "O'Brien?",
    ),
    _r(
        "mixed",
        "The film starts at 8:40 and runs 2 hrs. 15 min., so you'll be out just before 11.",
        "8:40",
        "2 hrs. 15",
    ),
    _r(
        "mixed",
        "Mt. Everest is 8,849 meters tall, roughly 29,032 feet, according to the 2020 survey.",
        "Mt. Everest",
        "8,849",
        "29,032",
    ),
    _r(
        "mixed",
        "Alright! Lights off in the living room, and the thermostat is set to 20.5 degrees "
        "for the night.",
        "20.5",
    ),
)
