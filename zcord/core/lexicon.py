"""Small fixed word lists that retrieval and keyword derivation rely on.

- STOPWORDS: function words (pronouns, particles, auxiliaries, prepositions, conjunctions,
  determiners, question words). They never become derived keywords, and weighted recall
  ignores them in messages.
- LIGHT_WORDS: words that carry a little meaning but are everywhere in chat (greetings,
  thanks, very common verbs and adverbs, time deixis like today/今天). In weighted recall
  they still add to a memory's score, but a memory hit only by light or very common words
  is not recalled.
- SURNAMES: common Chinese surnames, so nicknames such as 小李, 老张, 阿珍 and forms like 李哥,
  王姐 are kept whole even where jieba's dictionary does not know them.

All entries are in comparison form (NFKC + casefold). English entries are whole words as
they appear in text, before inflection folding.
"""

from __future__ import annotations

_EN_STOP = """
a an the this that these those there here some any each every either neither no not nor
i me my mine myself we us our ours ourselves you your yours yourself yourselves
he him his himself she her hers herself it its itself they them their theirs themselves
one ones someone somebody something anyone anybody anything everyone everybody everything
nobody nothing none other others another such own same
am is are was were be been being have has had having do does did doing done
will would shall should can could may might must ought
isn aren wasn weren hasn haven hadn doesn don didn won wouldn shan shouldn can't cannot
couldn mustn mightn needn ain let lets
to of in on at by for with about against between into through during before after above
below from up down out off over under again further then once onto upon within without
along across behind beyond near toward towards around among via per than
and but or so if because as until while although though unless whether yet also too
what which who whom whose when where why how whatever whoever whenever wherever
very just only even ever quite rather really much many more most less least few lot lots
s t d ll m o re ve y im ive id youre youve youll thats whats theres heres lets
oh ah uh um hmm eh hey hi hello yo yeah yep yes nope nah ok okay okey k kk
all both
""".split()

_EN_LIGHT = """
like likes liked love loved want wants wanted go goes going went gone get gets got getting
make makes made know knows knew think thinks thought feel feels felt see sees saw seen
look looks looking come comes came take takes took give gives gave say says said tell told
ask asked need needs try tried use used put keep kept let mean means meant guess suppose
sure maybe perhaps probably actually basically literally totally definitely seriously
good great nice cool awesome fine bad well better best okay alright right wrong true
thing things stuff way ways time times day days today tonight tomorrow yesterday now
morning evening afternoon night week weekend moment bit little big small new old
back still already again always never sometimes often soon later just now anyway
thanks thank thx ty please pls sorry welcome bye goodbye goodnight gn gm morning
start started finish finished plan plans planning idea ideas sound sounds worry worries worried
bored boring fun funny cute glad happy sad tired busy ready easy hard lucky weird crazy amazing
listen listening remember remind forget forgot wait waiting hope hoping miss missed wish
help helped thing check yeah sure cool awesome appreciate proud
work works working next last late home bed everybody tonight best
lol lmao haha hahaha hehe xd omg wow yay ugh hmm huh nice cool same agree true
people person guy guys man dude friend friends everyone anyone somebody someone
doing done happen happened happening going gonna wanna gotta kinda sorta
talk talking chat chatting said speak tell telling hear heard
""".split()

_ZH_STOP = """
的 了 着 过 地 得 之 所 在 是 有 和 与 及 跟 同 把 被 给 让 向 从 对 为 以 于 而 并 或 且
我 你 您 他 她 它 我们 你们 他们 她们 它们 咱 咱们 大家 自己 人家 别人
这 那 哪 这个 那个 哪个 这些 那些 哪些 这里 那里 哪里 这儿 那儿 哪儿 这样 那样 怎样 这么 那么 多么
什么 怎么 怎么样 为什么 为何 如何 谁 几 多少 几个 哪样 啥 咋 咋样
吗 呢 吧 啊 呀 哇 哦 噢 嗯 嗯嗯 唉 哎 诶 喔 嘛 啦 咯 哈 嘿 呵 呵呵 哼 哟 么 罢了 而已
一个 一些 一下 一点 一点儿 有点 有些 一样 一起 一直 一般 一定
也 都 还 又 就 才 再 很 太 更 最 挺 蛮 真 好 没 不 别 非常 特别 比较 十分 相当
不是 就是 还是 但是 可是 只是 于是 要是 或者 而且 因为 所以 如果 虽然 然后 然而 而是 不过
已经 正在 曾经 刚刚 刚才 马上 立刻 总是 常常 经常 往往 其实 当然 真的 确实 的确 大概 也许 可能
可以 能够 应该 需要 必须 得要 想要 要 会 能 想 去 来 说 看 做 到 上 下 中 里 外 前 后
个 些 种 样 次 件 位 只 条 点 下子 的话 来说 而言 之类 等等 等
一只 一次 一条 一件 一位 一种 一把 一张 一本 一场 一顿 一块 一群 一遍 一回 一番 一阵
""".split()

_ZH_LIGHT = """
哈哈 哈哈哈 哈哈哈哈 嘿嘿 嘻嘻 呵呵 哈 好的 好吧 好啊 好嘞 行吧 行 可以啊 没事 没关系 没问题
谢谢 谢啦 多谢 感谢 辛苦 辛苦了 不客气 对不起 抱歉 不好意思 再见 拜拜 晚安 早安 早上好 晚上好 中午好 午安
你好 您好 大家好 在吗 在不在 收到 知道了 明白 明白了 懂了 了解 是的 对的 对啊 没错 确实 真的吗 是吗 真的假的
今天 明天 昨天 后天 前天 今晚 明晚 昨晚 现在 刚才 以后 之前 之后 最近 今年 明年 去年 时候 时间 一会 一会儿
早上 上午 中午 下午 晚上 半夜 周末 平时 每天 天天 有时 有时候 一下子 马上 等下 等会
喜欢 觉得 知道 认为 感觉 希望 记得 记住 忘记 发现 看看 试试 聊聊 聊天 说话 告诉 问问 想想 看到 听到 听说
东西 事情 事儿 问题 情况 样子 地方 方面 部分 原因 结果 意思 办法 感受
好吃 好看 好玩 不错 厉害 可爱 开心 高兴 难过 无聊 好累 累 困 饿 忙 烦 真好 挺好 太好了 好棒 加油
朋友 大家 别人 有人 人家 家伙 小伙伴
""".split()

# Single characters that carry no topic on their own: particles, pronouns, numerals, measure
# words, and the commonest verbs and adjectives. Other single characters standing alone in
# a message (腿, 鸟, 腰, 猫) are weak terms of weighted recall.
SINGLE_STOP = frozenset(
    "的了着过地得之所在是有和与及跟同把被给让向从对为以于而并或且我你您他她它咱这那哪谁啥咋几多少"
    "吗呢吧啊呀哇哦噢嗯唉哎诶喔嘛啦咯哈嘿呵哼哟么也都还又就才再很太更最挺蛮真好没不别要会能想去来说看做到"
    "见动干上下中里外前后个些种样次件位只条点一二三四五六七八九十百千万两半每各某啊吃喝玩走跑拿放找用弄搞让叫问等"
    "行对错新旧大小高低长短快慢早晚多少今明昨年月日号天时分秒周第些啦呗嘞哒滴噻撒喽咧家人事回出进开关"
)

# Heads of Chinese compounds that name a product made of the compound's first part: 花生酱
# is made of peanuts, 芒果汁 of mangoes, 牛肉干 of beef, 葡萄酒 of grapes. A message word
# ending in one of them is also about its first part (text.compound_parts); other heads
# make the first part a modifier only (茶叶蛋 is an egg, not tea).
PRODUCT_HEADS = frozenset("酱油汁奶粉酒糖干片仁酥糕饼丸串浆醋泥粥羹茶面汤馅")

# Aspect and result suffixes of Chinese verbs: in 跑过, 吃完, 戒掉 the verb is the head.
VERB_SUFFIXES = frozenset("过了着完掉")

# The ~120 commonest single-character Chinese surnames.
SURNAMES = frozenset(
    "王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘于蒋蔡余杜叶程苏魏吕丁任沈"
    "姚卢姜崔钟谭陆汪范金石廖贾夏韦付方白邹孟熊秦邱江尹薛闫段雷侯龙史陶黎贺顾毛郝龚邵万钱严覃武戴莫孔向汤"
    "常温康施文牛樊葛邢安齐易乔伍庞颜倪庄聂章鲁岳翟殷詹申欧耿关兰焦俞左柳甘祝包宁尚符舒阮柯纪梅童凌毕单季裴霍涂成苗谷盛曲翁冉骆蓝路游辛靳管柴蒙鲍华喻祁蒲房滕屈饶解牟艾尤阳时穆农司卓古吉缪简车项连芦麦褚娄窦戚岑景党宫费卜冷晏席卫米柏宗瞿桂全佟应臧闵苟邬边卞姬师和仇栾隋商刁沙荣巫寇桑郎甄丛仲虞敖巩明佘池查麻苑迟邝"
)

# Prefixes and suffixes that make a name of a surname: 小李, 老张, 阿珍, 李哥, 王姐, 张总.
NAME_PREFIXES = frozenset("小老阿")
NAME_SUFFIXES = frozenset("哥姐总叔姨爷嫂婶")

# Greetings, thanks and goodbyes: a batch holding one whose only evidence is a person's name
# ("Hi Sam!", "thanks, Caroline") addresses the person and asks nothing about them.
GREETINGS = frozenset("""
hi hello hey heya hiya yo howdy thanks thank thx ty cheers bye goodbye goodnight
anytime welcome congrats congratulations later cya ttyl nite
你好 您好 嗨 哈喽 谢谢 谢啦 多谢 感谢 晚安 早安 早上好 晚上好 拜拜 再见 辛苦了
再聊 回聊 回头见 明天见 下次见
""".split())

# Chat filler for weighted recall only (issue 37), not left out of derived keywords (so
# the keywords of seed mode stay as they were): goodbyes and closings, the words of "what
# is it called" and "when" questions, which ask about a topic without naming one, and the
# negated modal verbs (能, 会, 要 are function words already).
_EN_RECALL_LIGHT = """
name names named called ya cya ttyl later nite
"""
_ZH_RECALL_LIGHT = """
再聊 回聊 改天 回头 回头见 明天见 下次见 待会见 一会见 先这样 就这样 到这儿 早点 休息 下线 先撤 撤了
注意安全 路上小心 注意身体 保重 慢走 一路顺风 一路平安
名字 叫做 称呼 来着 几点 哪天 哪年 多久 多大 什么时候 啥时候 哪家 哪位 干嘛 干啥
不能 不会 不要 不用 不行 不想 不可以 能不能 会不会 要不要
"""

# What makes a message ask something, besides "?" (NFKC makes one of "？"): an English first
# word that opens a question or a request to be told (remind me, tell me), or Chinese
# asking and requesting words and characters anywhere in it.
QUESTION_OPENERS = frozenset("""
what which who whom whose when where why how do does did is are was were can could should would will
have has any anything tell remind show find check
""".split())
QUESTION_WORDS = frozenset("""
什么 怎么 怎么样 为什么 为何 如何 谁 多少 哪个 哪些 哪里 哪儿 哪天 哪家 哪位 几点 几个 啥 咋 咋样 啥时候
什么时候 是不是 有没有 能不能 要不要 会不会 告诉 提醒 帮忙 查查 查一下
""".split())
QUESTION_CHARS = frozenset("吗几哪啥咋谁")

STOPWORDS = frozenset(_EN_STOP) | frozenset(_ZH_STOP)
KEYWORD_LIGHT = (frozenset(_EN_LIGHT) | frozenset(_ZH_LIGHT)) - STOPWORDS
"""Chat filler left out of derived keywords."""
LIGHT_WORDS = (KEYWORD_LIGHT | frozenset(_EN_RECALL_LIGHT.split()) | frozenset(_ZH_RECALL_LIGHT.split())) - STOPWORDS
"""Chat filler of weighted recall: counts half, never makes a hit alone."""

# English irregular forms, folded to their base form before stemming (weighted recall):
# "base: forms". Past tenses and participles of the common irregular verbs, irregular plurals;
# forms that are also common words of another meaning are left out (left, ground, wound,
# rose, bit, shot, lay, lives, leaves).
_EN_IRREGULAR = """
arise: arose arisen | awake: awoke awoken | be: was were been | bear: bore borne
beat: beaten | become: became | begin: began begun | bend: bent | bet: betted
bite: bitten | bleed: bled | blow: blew blown | break: broke broken | breed: bred
bring: brought | build: built | burn: burnt | buy: bought | catch: caught | choose: chose chosen
cling: clung | come: came | creep: crept | deal: dealt | dig: dug | do: did done
draw: drew drawn | dream: dreamt | drink: drank drunk | drive: drove driven | eat: ate eaten
fall: fell fallen | feed: fed | feel: felt | fight: fought | find: found | flee: fled
fly: flew flown | forbid: forbade forbidden | forget: forgot forgotten | forgive: forgave forgiven
freeze: froze frozen | get: got gotten | give: gave given | go: went gone
grow: grew grown | hang: hung | have: had | hear: heard | hide: hid hidden | hold: held
keep: kept | kneel: knelt | know: knew known | lay: laid | lead: led | lean: leant
leap: leapt | learn: learnt | lend: lent | lie: lain | light: lit
lose: lost | make: made | mean: meant | meet: met | mistake: mistook mistaken
overcome: overcame | pay: paid | prove: proven | ride: rode ridden | ring: rang rung
rise: risen | run: ran | say: said | see: saw seen | seek: sought | sell: sold
send: sent | sew: sewn | shake: shook shaken | shine: shone | show: shown
shrink: shrank shrunk | sing: sang sung | sink: sank sunk | sit: sat | sleep: slept
slide: slid | speak: spoke spoken | speed: sped | spend: spent | spin: spun | spit: spat
spoil: spoilt | spring: sprang sprung | stand: stood | steal: stole stolen | stick: stuck
sting: stung | stink: stank stunk | strike: struck | swear: swore sworn | sweep: swept
swim: swam swum | swing: swung | take: took taken | teach: taught | tear: tore torn
tell: told | think: thought | throw: threw thrown | understand: understood | wake: woke woken
wear: wore worn | weave: wove woven | weep: wept | win: won | write: wrote written
child: children | man: men | woman: women | person: people | mouse: mice | foot: feet
tooth: teeth | goose: geese | ox: oxen | wife: wives | knife: knives | wolf: wolves
half: halves | shelf: shelves | thief: thieves | loaf: loaves
"""

IRREGULAR = {form: base.strip() for entry in _EN_IRREGULAR.replace("\n", " | ").split("|") if ":" in entry
             for base, forms in [entry.split(":")] for form in forms.split()}
"""English irregular form -> its base form (went -> go, bought -> buy, children -> child)."""

# Words a stemmer would cut to another word they do not mean: kept whole (longing is not
# long, evening is not even, news is not new).
STEM_KEEP = frozenset("""
longing longings evening evenings morning mornings nothing something anything everything
ceiling ceilings pudding puddings darling darlings sibling siblings wedding weddings during
news herring earring earrings offspring sterling shilling bedding stuffing icing
""".split())


# Everyday phrasal uses of verbs whose own meaning can be a memory's topic: "heading to bed"
# is going to bed, not *deputy head*; "running late" is being late, not *running a marathon*.
# "verb: the words that make the phrase", the verb in its base form (any inflection counts:
# heading, ran). In a message, the verb followed by one of them — after at most two function
# words or "bit"/"little" (running a bit late, heading off to bed) — is chat filler there.
_EN_PHRASAL = """
head: to home out off back over up down in bed upstairs downstairs inside outside
run: late behind out low errands around
hang: out around in tight
catch: up you
turn: in
call: it
hit: the up
grab: a some
pop: in out over by
drop: by off in
swing: by
sign: off out
log: off on out in
wrap: up
show: up
step: out away
hop: on off in
jump: on in
"""

PHRASAL = {base.strip(): frozenset(rest.split()) for line in _EN_PHRASAL.strip().splitlines()
           for base, rest in [line.split(":")]}
"""English verb (base form) -> the words that make an everyday phrase of it."""

PHRASAL_GAP = frozenset("bit little".split())
"""Besides function words, what may stand between a phrasal verb and its word."""
