from typing import Any, Literal, NotRequired, TypedDict, Union

class ToolCallError(Exception):
    """Raised when a tool call fails; tool_name names the tool."""

    tool_name: str

class BigEnumArgs(TypedDict):
    v: Literal["v000", "v001", "v002", "v003", "v004", "v005", "v006", "v007", "v008", "v009", "v010", "v011", "v012", "v013", "v014", "v015", "v016", "v017", "v018", "v019", "v020", "v021", "v022", "v023", "v024", "v025", "v026", "v027", "v028", "v029", "v030", "v031", "v032", "v033", "v034", "v035", "v036", "v037", "v038", "v039", "v040", "v041", "v042", "v043", "v044", "v045", "v046", "v047", "v048", "v049", "v050", "v051", "v052", "v053", "v054", "v055", "v056", "v057", "v058", "v059", "v060", "v061", "v062", "v063", "v064", "v065", "v066", "v067", "v068", "v069", "v070", "v071", "v072", "v073", "v074", "v075", "v076", "v077", "v078", "v079", "v080", "v081", "v082", "v083", "v084", "v085", "v086", "v087", "v088", "v089", "v090", "v091", "v092", "v093", "v094", "v095", "v096", "v097", "v098", "v099", "v100", "v101", "v102", "v103", "v104", "v105", "v106", "v107", "v108", "v109", "v110", "v111", "v112", "v113", "v114", "v115", "v116", "v117", "v118", "v119", "v120", "v121", "v122", "v123", "v124", "v125", "v126", "v127", "v128", "v129", "v130", "v131", "v132", "v133", "v134", "v135", "v136", "v137", "v138", "v139", "v140", "v141", "v142", "v143", "v144", "v145", "v146", "v147", "v148", "v149", "v150", "v151", "v152", "v153", "v154", "v155", "v156", "v157", "v158", "v159", "v160", "v161", "v162", "v163", "v164", "v165", "v166", "v167", "v168", "v169", "v170", "v171", "v172", "v173", "v174", "v175", "v176", "v177", "v178", "v179", "v180", "v181", "v182", "v183", "v184", "v185", "v186", "v187", "v188", "v189", "v190", "v191", "v192", "v193", "v194", "v195", "v196", "v197", "v198", "v199", "v200", "v201", "v202", "v203", "v204", "v205", "v206", "v207", "v208", "v209", "v210", "v211", "v212", "v213", "v214", "v215", "v216", "v217", "v218", "v219", "v220", "v221", "v222", "v223", "v224", "v225", "v226", "v227", "v228", "v229", "v230", "v231", "v232", "v233", "v234", "v235", "v236", "v237", "v238", "v239", "v240", "v241", "v242", "v243", "v244", "v245", "v246", "v247", "v248", "v249", "v250", "v251", "v252", "v253", "v254", "v255", "v256", "v257", "v258", "v259", "v260", "v261", "v262", "v263", "v264", "v265", "v266", "v267", "v268", "v269", "v270", "v271", "v272", "v273", "v274", "v275", "v276", "v277", "v278", "v279", "v280", "v281", "v282", "v283", "v284", "v285", "v286", "v287", "v288", "v289", "v290", "v291", "v292", "v293", "v294", "v295", "v296", "v297", "v298", "v299"]

class ManyVariantsArgsVVariant1(TypedDict):
    k0: str

class ManyVariantsArgsVVariant2(TypedDict):
    k1: str

class ManyVariantsArgsVVariant3(TypedDict):
    k2: str

class ManyVariantsArgsVVariant4(TypedDict):
    k3: str

class ManyVariantsArgsVVariant5(TypedDict):
    k4: str

class ManyVariantsArgsVVariant6(TypedDict):
    k5: str

class ManyVariantsArgsVVariant7(TypedDict):
    k6: str

class ManyVariantsArgsVVariant8(TypedDict):
    k7: str

class ManyVariantsArgsVVariant9(TypedDict):
    k8: str

class ManyVariantsArgsVVariant10(TypedDict):
    k9: str

class ManyVariantsArgsVVariant11(TypedDict):
    k10: str

class ManyVariantsArgsVVariant12(TypedDict):
    k11: str

class ManyVariantsArgsVVariant13(TypedDict):
    k12: str

class ManyVariantsArgsVVariant14(TypedDict):
    k13: str

class ManyVariantsArgsVVariant15(TypedDict):
    k14: str

class ManyVariantsArgsVVariant16(TypedDict):
    k15: str

class ManyVariantsArgsVVariant17(TypedDict):
    k16: str

class ManyVariantsArgsVVariant18(TypedDict):
    k17: str

class ManyVariantsArgsVVariant19(TypedDict):
    k18: str

class ManyVariantsArgsVVariant20(TypedDict):
    k19: str

class ManyVariantsArgsVVariant21(TypedDict):
    k20: str

class ManyVariantsArgsVVariant22(TypedDict):
    k21: str

class ManyVariantsArgsVVariant23(TypedDict):
    k22: str

class ManyVariantsArgsVVariant24(TypedDict):
    k23: str

class ManyVariantsArgsVVariant25(TypedDict):
    k24: str

class ManyVariantsArgsVVariant26(TypedDict):
    k25: str

class ManyVariantsArgsVVariant27(TypedDict):
    k26: str

class ManyVariantsArgsVVariant28(TypedDict):
    k27: str

class ManyVariantsArgsVVariant29(TypedDict):
    k28: str

class ManyVariantsArgsVVariant30(TypedDict):
    k29: str

class ManyVariantsArgsVVariant31(TypedDict):
    k30: str

class ManyVariantsArgsVVariant32(TypedDict):
    k31: str

class ManyVariantsArgsVVariant33(TypedDict):
    k32: str

class ManyVariantsArgsVVariant34(TypedDict):
    k33: str

class ManyVariantsArgsVVariant35(TypedDict):
    k34: str

class ManyVariantsArgsVVariant36(TypedDict):
    k35: str

class ManyVariantsArgsVVariant37(TypedDict):
    k36: str

class ManyVariantsArgsVVariant38(TypedDict):
    k37: str

class ManyVariantsArgsVVariant39(TypedDict):
    k38: str

class ManyVariantsArgsVVariant40(TypedDict):
    k39: str

class ManyVariantsArgsVVariant41(TypedDict):
    k40: str

class ManyVariantsArgsVVariant42(TypedDict):
    k41: str

class ManyVariantsArgsVVariant43(TypedDict):
    k42: str

class ManyVariantsArgsVVariant44(TypedDict):
    k43: str

class ManyVariantsArgsVVariant45(TypedDict):
    k44: str

class ManyVariantsArgsVVariant46(TypedDict):
    k45: str

class ManyVariantsArgsVVariant47(TypedDict):
    k46: str

class ManyVariantsArgsVVariant48(TypedDict):
    k47: str

class ManyVariantsArgsVVariant49(TypedDict):
    k48: str

class ManyVariantsArgsVVariant50(TypedDict):
    k49: str

class ManyVariantsArgsVVariant51(TypedDict):
    k50: str

class ManyVariantsArgsVVariant52(TypedDict):
    k51: str

class ManyVariantsArgsVVariant53(TypedDict):
    k52: str

class ManyVariantsArgsVVariant54(TypedDict):
    k53: str

class ManyVariantsArgsVVariant55(TypedDict):
    k54: str

class ManyVariantsArgsVVariant56(TypedDict):
    k55: str

class ManyVariantsArgsVVariant57(TypedDict):
    k56: str

class ManyVariantsArgsVVariant58(TypedDict):
    k57: str

class ManyVariantsArgsVVariant59(TypedDict):
    k58: str

class ManyVariantsArgsVVariant60(TypedDict):
    k59: str

class ManyVariantsArgsVVariant61(TypedDict):
    k60: str

class ManyVariantsArgsVVariant62(TypedDict):
    k61: str

class ManyVariantsArgsVVariant63(TypedDict):
    k62: str

class ManyVariantsArgsVVariant64(TypedDict):
    k63: str

class ManyVariantsArgsVVariant65(TypedDict):
    k64: str

class ManyVariantsArgsVVariant66(TypedDict):
    k65: str

class ManyVariantsArgsVVariant67(TypedDict):
    k66: str

class ManyVariantsArgsVVariant68(TypedDict):
    k67: str

class ManyVariantsArgsVVariant69(TypedDict):
    k68: str

class ManyVariantsArgsVVariant70(TypedDict):
    k69: str

class ManyVariantsArgsVVariant71(TypedDict):
    k70: str

class ManyVariantsArgsVVariant72(TypedDict):
    k71: str

class ManyVariantsArgsVVariant73(TypedDict):
    k72: str

class ManyVariantsArgsVVariant74(TypedDict):
    k73: str

class ManyVariantsArgsVVariant75(TypedDict):
    k74: str

class ManyVariantsArgsVVariant76(TypedDict):
    k75: str

class ManyVariantsArgsVVariant77(TypedDict):
    k76: str

class ManyVariantsArgsVVariant78(TypedDict):
    k77: str

class ManyVariantsArgsVVariant79(TypedDict):
    k78: str

class ManyVariantsArgsVVariant80(TypedDict):
    k79: str

class ManyVariantsArgsVVariant81(TypedDict):
    k80: str

class ManyVariantsArgsVVariant82(TypedDict):
    k81: str

class ManyVariantsArgsVVariant83(TypedDict):
    k82: str

class ManyVariantsArgsVVariant84(TypedDict):
    k83: str

class ManyVariantsArgsVVariant85(TypedDict):
    k84: str

class ManyVariantsArgsVVariant86(TypedDict):
    k85: str

class ManyVariantsArgsVVariant87(TypedDict):
    k86: str

class ManyVariantsArgsVVariant88(TypedDict):
    k87: str

class ManyVariantsArgsVVariant89(TypedDict):
    k88: str

class ManyVariantsArgsVVariant90(TypedDict):
    k89: str

class ManyVariantsArgsVVariant91(TypedDict):
    k90: str

class ManyVariantsArgsVVariant92(TypedDict):
    k91: str

class ManyVariantsArgsVVariant93(TypedDict):
    k92: str

class ManyVariantsArgsVVariant94(TypedDict):
    k93: str

class ManyVariantsArgsVVariant95(TypedDict):
    k94: str

class ManyVariantsArgsVVariant96(TypedDict):
    k95: str

class ManyVariantsArgsVVariant97(TypedDict):
    k96: str

class ManyVariantsArgsVVariant98(TypedDict):
    k97: str

class ManyVariantsArgsVVariant99(TypedDict):
    k98: str

class ManyVariantsArgsVVariant100(TypedDict):
    k99: str

class ManyVariantsArgsVVariant101(TypedDict):
    k100: str

class ManyVariantsArgsWVariant1(TypedDict):
    k0: str

class ManyVariantsArgsWVariant2(TypedDict):
    k1: str

class ManyVariantsArgsWVariant3(TypedDict):
    k2: str

class ManyVariantsArgs(TypedDict):
    v: NotRequired[Union[ManyVariantsArgsVVariant1, ManyVariantsArgsVVariant2, ManyVariantsArgsVVariant3, ManyVariantsArgsVVariant4, ManyVariantsArgsVVariant5, ManyVariantsArgsVVariant6, ManyVariantsArgsVVariant7, ManyVariantsArgsVVariant8, ManyVariantsArgsVVariant9, ManyVariantsArgsVVariant10, ManyVariantsArgsVVariant11, ManyVariantsArgsVVariant12, ManyVariantsArgsVVariant13, ManyVariantsArgsVVariant14, ManyVariantsArgsVVariant15, ManyVariantsArgsVVariant16, ManyVariantsArgsVVariant17, ManyVariantsArgsVVariant18, ManyVariantsArgsVVariant19, ManyVariantsArgsVVariant20, ManyVariantsArgsVVariant21, ManyVariantsArgsVVariant22, ManyVariantsArgsVVariant23, ManyVariantsArgsVVariant24, ManyVariantsArgsVVariant25, ManyVariantsArgsVVariant26, ManyVariantsArgsVVariant27, ManyVariantsArgsVVariant28, ManyVariantsArgsVVariant29, ManyVariantsArgsVVariant30, ManyVariantsArgsVVariant31, ManyVariantsArgsVVariant32, ManyVariantsArgsVVariant33, ManyVariantsArgsVVariant34, ManyVariantsArgsVVariant35, ManyVariantsArgsVVariant36, ManyVariantsArgsVVariant37, ManyVariantsArgsVVariant38, ManyVariantsArgsVVariant39, ManyVariantsArgsVVariant40, ManyVariantsArgsVVariant41, ManyVariantsArgsVVariant42, ManyVariantsArgsVVariant43, ManyVariantsArgsVVariant44, ManyVariantsArgsVVariant45, ManyVariantsArgsVVariant46, ManyVariantsArgsVVariant47, ManyVariantsArgsVVariant48, ManyVariantsArgsVVariant49, ManyVariantsArgsVVariant50, ManyVariantsArgsVVariant51, ManyVariantsArgsVVariant52, ManyVariantsArgsVVariant53, ManyVariantsArgsVVariant54, ManyVariantsArgsVVariant55, ManyVariantsArgsVVariant56, ManyVariantsArgsVVariant57, ManyVariantsArgsVVariant58, ManyVariantsArgsVVariant59, ManyVariantsArgsVVariant60, ManyVariantsArgsVVariant61, ManyVariantsArgsVVariant62, ManyVariantsArgsVVariant63, ManyVariantsArgsVVariant64, ManyVariantsArgsVVariant65, ManyVariantsArgsVVariant66, ManyVariantsArgsVVariant67, ManyVariantsArgsVVariant68, ManyVariantsArgsVVariant69, ManyVariantsArgsVVariant70, ManyVariantsArgsVVariant71, ManyVariantsArgsVVariant72, ManyVariantsArgsVVariant73, ManyVariantsArgsVVariant74, ManyVariantsArgsVVariant75, ManyVariantsArgsVVariant76, ManyVariantsArgsVVariant77, ManyVariantsArgsVVariant78, ManyVariantsArgsVVariant79, ManyVariantsArgsVVariant80, ManyVariantsArgsVVariant81, ManyVariantsArgsVVariant82, ManyVariantsArgsVVariant83, ManyVariantsArgsVVariant84, ManyVariantsArgsVVariant85, ManyVariantsArgsVVariant86, ManyVariantsArgsVVariant87, ManyVariantsArgsVVariant88, ManyVariantsArgsVVariant89, ManyVariantsArgsVVariant90, ManyVariantsArgsVVariant91, ManyVariantsArgsVVariant92, ManyVariantsArgsVVariant93, ManyVariantsArgsVVariant94, ManyVariantsArgsVVariant95, ManyVariantsArgsVVariant96, ManyVariantsArgsVVariant97, ManyVariantsArgsVVariant98, ManyVariantsArgsVVariant99, ManyVariantsArgsVVariant100, ManyVariantsArgsVVariant101]]
    w: NotRequired[ManyVariantsArgsWVariant1 | ManyVariantsArgsWVariant2 | ManyVariantsArgsWVariant3]

class Tools:
    async def big_enum(self, args: BigEnumArgs) -> str:
        """An enum of 300 strings."""
        ...

    async def many_variants(self, args: ManyVariantsArgs) -> str:
        """anyOf with 101 record variants: Python writes more than 100 alternatives as one flat Union[...]."""
        ...

tools: Tools
