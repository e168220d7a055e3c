declare const tools: {
  /** An enum of 300 strings. */
  "big_enum": (args: {
    v: "v000" | "v001" | "v002" | "v003" | "v004" | "v005" | "v006" | "v007" | "v008" | "v009" | "v010" | "v011" | "v012" | "v013" | "v014" | "v015" | "v016" | "v017" | "v018" | "v019" | "v020" | "v021" | "v022" | "v023" | "v024" | "v025" | "v026" | "v027" | "v028" | "v029" | "v030" | "v031" | "v032" | "v033" | "v034" | "v035" | "v036" | "v037" | "v038" | "v039" | "v040" | "v041" | "v042" | "v043" | "v044" | "v045" | "v046" | "v047" | "v048" | "v049" | "v050" | "v051" | "v052" | "v053" | "v054" | "v055" | "v056" | "v057" | "v058" | "v059" | "v060" | "v061" | "v062" | "v063" | "v064" | "v065" | "v066" | "v067" | "v068" | "v069" | "v070" | "v071" | "v072" | "v073" | "v074" | "v075" | "v076" | "v077" | "v078" | "v079" | "v080" | "v081" | "v082" | "v083" | "v084" | "v085" | "v086" | "v087" | "v088" | "v089" | "v090" | "v091" | "v092" | "v093" | "v094" | "v095" | "v096" | "v097" | "v098" | "v099" | "v100" | "v101" | "v102" | "v103" | "v104" | "v105" | "v106" | "v107" | "v108" | "v109" | "v110" | "v111" | "v112" | "v113" | "v114" | "v115" | "v116" | "v117" | "v118" | "v119" | "v120" | "v121" | "v122" | "v123" | "v124" | "v125" | "v126" | "v127" | "v128" | "v129" | "v130" | "v131" | "v132" | "v133" | "v134" | "v135" | "v136" | "v137" | "v138" | "v139" | "v140" | "v141" | "v142" | "v143" | "v144" | "v145" | "v146" | "v147" | "v148" | "v149" | "v150" | "v151" | "v152" | "v153" | "v154" | "v155" | "v156" | "v157" | "v158" | "v159" | "v160" | "v161" | "v162" | "v163" | "v164" | "v165" | "v166" | "v167" | "v168" | "v169" | "v170" | "v171" | "v172" | "v173" | "v174" | "v175" | "v176" | "v177" | "v178" | "v179" | "v180" | "v181" | "v182" | "v183" | "v184" | "v185" | "v186" | "v187" | "v188" | "v189" | "v190" | "v191" | "v192" | "v193" | "v194" | "v195" | "v196" | "v197" | "v198" | "v199" | "v200" | "v201" | "v202" | "v203" | "v204" | "v205" | "v206" | "v207" | "v208" | "v209" | "v210" | "v211" | "v212" | "v213" | "v214" | "v215" | "v216" | "v217" | "v218" | "v219" | "v220" | "v221" | "v222" | "v223" | "v224" | "v225" | "v226" | "v227" | "v228" | "v229" | "v230" | "v231" | "v232" | "v233" | "v234" | "v235" | "v236" | "v237" | "v238" | "v239" | "v240" | "v241" | "v242" | "v243" | "v244" | "v245" | "v246" | "v247" | "v248" | "v249" | "v250" | "v251" | "v252" | "v253" | "v254" | "v255" | "v256" | "v257" | "v258" | "v259" | "v260" | "v261" | "v262" | "v263" | "v264" | "v265" | "v266" | "v267" | "v268" | "v269" | "v270" | "v271" | "v272" | "v273" | "v274" | "v275" | "v276" | "v277" | "v278" | "v279" | "v280" | "v281" | "v282" | "v283" | "v284" | "v285" | "v286" | "v287" | "v288" | "v289" | "v290" | "v291" | "v292" | "v293" | "v294" | "v295" | "v296" | "v297" | "v298" | "v299";
  }) => Promise<string>;
  /** anyOf with 101 record variants: Python writes more than 100 alternatives as one flat Union[...]. */
  "many_variants": (args: {
    v?: {
      k0: string;
    } | {
      k1: string;
    } | {
      k2: string;
    } | {
      k3: string;
    } | {
      k4: string;
    } | {
      k5: string;
    } | {
      k6: string;
    } | {
      k7: string;
    } | {
      k8: string;
    } | {
      k9: string;
    } | {
      k10: string;
    } | {
      k11: string;
    } | {
      k12: string;
    } | {
      k13: string;
    } | {
      k14: string;
    } | {
      k15: string;
    } | {
      k16: string;
    } | {
      k17: string;
    } | {
      k18: string;
    } | {
      k19: string;
    } | {
      k20: string;
    } | {
      k21: string;
    } | {
      k22: string;
    } | {
      k23: string;
    } | {
      k24: string;
    } | {
      k25: string;
    } | {
      k26: string;
    } | {
      k27: string;
    } | {
      k28: string;
    } | {
      k29: string;
    } | {
      k30: string;
    } | {
      k31: string;
    } | {
      k32: string;
    } | {
      k33: string;
    } | {
      k34: string;
    } | {
      k35: string;
    } | {
      k36: string;
    } | {
      k37: string;
    } | {
      k38: string;
    } | {
      k39: string;
    } | {
      k40: string;
    } | {
      k41: string;
    } | {
      k42: string;
    } | {
      k43: string;
    } | {
      k44: string;
    } | {
      k45: string;
    } | {
      k46: string;
    } | {
      k47: string;
    } | {
      k48: string;
    } | {
      k49: string;
    } | {
      k50: string;
    } | {
      k51: string;
    } | {
      k52: string;
    } | {
      k53: string;
    } | {
      k54: string;
    } | {
      k55: string;
    } | {
      k56: string;
    } | {
      k57: string;
    } | {
      k58: string;
    } | {
      k59: string;
    } | {
      k60: string;
    } | {
      k61: string;
    } | {
      k62: string;
    } | {
      k63: string;
    } | {
      k64: string;
    } | {
      k65: string;
    } | {
      k66: string;
    } | {
      k67: string;
    } | {
      k68: string;
    } | {
      k69: string;
    } | {
      k70: string;
    } | {
      k71: string;
    } | {
      k72: string;
    } | {
      k73: string;
    } | {
      k74: string;
    } | {
      k75: string;
    } | {
      k76: string;
    } | {
      k77: string;
    } | {
      k78: string;
    } | {
      k79: string;
    } | {
      k80: string;
    } | {
      k81: string;
    } | {
      k82: string;
    } | {
      k83: string;
    } | {
      k84: string;
    } | {
      k85: string;
    } | {
      k86: string;
    } | {
      k87: string;
    } | {
      k88: string;
    } | {
      k89: string;
    } | {
      k90: string;
    } | {
      k91: string;
    } | {
      k92: string;
    } | {
      k93: string;
    } | {
      k94: string;
    } | {
      k95: string;
    } | {
      k96: string;
    } | {
      k97: string;
    } | {
      k98: string;
    } | {
      k99: string;
    } | {
      k100: string;
    };
    w?: {
      k0: string;
    } | {
      k1: string;
    } | {
      k2: string;
    };
  }) => Promise<string>;
};
